// Report a bug: the "Reported before?" panel follows the draft as it is typed.
//
// The form is posted to its own URL with `X-UI-Fragment: duplicates`; the
// server answers with the panel rendered from check_duplicates (nothing is
// saved) and it replaces the one on the page. No record text is put together
// as HTML here: the nodes come from the server's escaped template.
(function () {
  "use strict";

  const DEBOUNCE_MS = 400;
  const WATCHED = ["title", "description", "steps", "actual_result", "expected_result", "environment", "product"];

  function checker(form) {
    const status = document.getElementById("duplicates-status");
    let controller = null;
    let sent = "";
    let timer;

    function draftKey() {
      const data = new FormData(form);
      return WATCHED.map(function (name) { return (data.get(name) || "").trim(); }).join("\u0000");
    }

    async function check() {
      const key = draftKey();
      if (key === sent) return;
      sent = key;
      if (controller) controller.abort();
      controller = new AbortController();
      const panel = document.getElementById("duplicates-panel");
      panel.setAttribute("aria-busy", "true");
      let fresh = null;
      try {
        // getAttribute: form.action would be the buttons named "action".
        const response = await fetch(form.getAttribute("action"), {
          method: "POST",
          body: new FormData(form),
          headers: { "X-UI-Fragment": "duplicates" },
          credentials: "same-origin",
          signal: controller.signal,
        });
        if (response.ok) {
          const body = new DOMParser().parseFromString(await response.text(), "text/html").body;
          fresh = body.querySelector("#duplicates-panel");
        }
      } catch (error) {
        if (error.name === "AbortError") return;
      }
      if (!fresh) {
        panel.removeAttribute("aria-busy");
        sent = ""; // try again on the next keystroke
        return;
      }
      const focused = panel.contains(document.activeElement) ? document.activeElement.value : null;
      panel.replaceWith(fresh);
      if (focused) {
        const again = fresh.querySelector('button[value="' + CSS.escape(focused) + '"]');
        if (again) again.focus();
      }
      const summary = fresh.querySelector("[data-summary]");
      status.textContent = summary ? summary.dataset.summary : "";
    }

    form.addEventListener("input", function (event) {
      if (!WATCHED.includes(event.target.name)) return;
      clearTimeout(timer);
      timer = setTimeout(check, DEBOUNCE_MS);
    });
    form.addEventListener("change", function (event) {
      if (event.target.name === "product") check();
    });
    if (form.elements.title.value.trim()) check();
  }

  // The Feature list offers the chosen product's features only (the server does the
  // same on a page load); each product's, under its name, while none is chosen.
  function featuresFollowProduct(form) {
    const data = document.getElementById("report-features");
    const product = form.elements.product;
    const feature = form.elements.feature;
    if (!data || !product || !feature) return;
    const byProduct = JSON.parse(data.textContent);
    const names = {};
    Array.from(product.options).forEach(function (option) { names[option.value] = option.textContent; });

    function options(listed) {
      return listed.map(function (pair) { return new Option(pair[1], pair[0]); });
    }

    function offer() {
      const kept = feature.value;
      const blank = new Option("---------", "");
      const chosen = byProduct[product.value];
      let offered;
      if (product.value) {
        offered = options(chosen || []);
      } else {
        offered = Object.keys(byProduct).map(function (key) {
          const group = document.createElement("optgroup");
          group.label = names[key] || key;
          group.append.apply(group, options(byProduct[key]));
          return group;
        });
      }
      feature.replaceChildren(blank, ...offered);
      feature.value = kept;
      if (feature.value !== kept) feature.value = ""; // another product's feature is no longer offered
    }

    product.addEventListener("change", offer);
    offer();
  }

  // The sentence beside "File bug" says where the chosen product's bug is filed
  // (its tracker, or here only and why), as the server says it on a page load.
  function destinationFollowsProduct(form) {
    const data = document.getElementById("report-destinations");
    const note = document.getElementById("filed-where");
    const product = form.elements.product;
    if (!data || !note || !product) return;
    const destinations = JSON.parse(data.textContent);
    const general = note.dataset.general;
    product.addEventListener("change", function () {
      const chosen = destinations[product.value];
      note.textContent = chosen ? chosen.note : general;
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    const form = document.querySelector("[data-duplicate-check]");
    if (!form) return;
    featuresFollowProduct(form);
    destinationFollowsProduct(form);
    checker(form);
  });
})();
