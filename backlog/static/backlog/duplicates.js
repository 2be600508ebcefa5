// The admin's add-bug form: likely duplicates of the bug being written.
//
// As the title and description are typed (debounced), the draft is posted to
// POST /api/bugs/check-duplicates (the session's own login, with its CSRF
// token) and the answer listed under the title. "Duplicate of BUG-x" fills
// the form's duplicate_of field and sets the status to duplicate; the
// curator still saves. Every text goes in through textContent, never as HTML.
(function () {
  "use strict";

  const DEBOUNCE_MS = 400;

  function csrfToken(form) {
    const input = form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function productKey(form) {
    // The product autocomplete shows "PRD-1 Tramline Mobile"; its key is the first word.
    const select = form.querySelector("#id_product");
    const option = select && select.selectedOptions[0];
    return option && option.value ? option.textContent.trim().split(/\s+/)[0] : null;
  }

  function setDuplicateOf(form, hit) {
    const field = form.querySelector("#id_duplicate_of");
    if (field) {
      if (field.tagName === "SELECT") {
        let option = Array.from(field.options).find((o) => o.value === String(hit.id));
        if (!option) {
          option = new Option(hit.key + " " + hit.title, String(hit.id));
          field.append(option);
        }
        field.value = String(hit.id);
      } else {
        field.value = String(hit.id);
      }
      field.dispatchEvent(new Event("change", { bubbles: true }));
    }
    const status = form.querySelector("#id_status");
    if (status) status.value = "duplicate";
  }

  function item(form, panel, hit) {
    const li = document.createElement("li");
    li.className = "band-" + hit.band;
    li.dataset.key = hit.key;
    const band = document.createElement("span");
    band.className = "duplicates-check-band";
    band.textContent = hit.band;
    band.title = "confidence " + hit.confidence;
    const link = document.createElement("a");
    link.href = panel.dataset.recordUrl.replace("KEY", encodeURIComponent(hit.key));
    link.target = "_blank";
    link.rel = "noopener";
    link.textContent = hit.key + " " + hit.title;
    const why = document.createElement("span");
    why.className = "help";
    const parts = [hit.status];
    if (hit.duplicate_of) parts.push("duplicate of " + hit.duplicate_of);
    if (hit.why.shared_words.length) parts.push("shares " + hit.why.shared_words.join(", "));
    if (hit.why.semantic_similarity !== null) parts.push("meaning " + hit.why.semantic_similarity.toFixed(2));
    why.textContent = " " + parts.join(" · ");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "button";
    // A bug that is itself a duplicate is linked as it is: the chain leads to its original.
    button.textContent = "Duplicate of " + hit.key;
    button.addEventListener("click", function () {
      setDuplicateOf(form, hit);
      form.querySelector("#duplicates-check-status").textContent =
        "Duplicate of " + hit.key + " set, status duplicate: save to file it linked.";
    });
    li.append(band, " ", link, why, " ", button);
    return li;
  }

  function start(form, panel) {
    const list = panel.querySelector("ol");
    const status = panel.querySelector("#duplicates-check-status");
    const title = form.querySelector("#id_title");
    const description = form.querySelector("#id_description");
    let controller = null;
    let sent = "";
    let timer;

    async function check() {
      const draft = { title: title.value.trim(), limit: 5, detail: "full" };  // full: the id the field takes
      if (description && description.value.trim()) draft.description = description.value.trim();
      const product = productKey(form);
      if (product) draft.product = product;
      const key = JSON.stringify(draft);
      if (draft.title.length < 2 || key === sent) return;
      sent = key;
      if (controller) controller.abort();
      controller = new AbortController();
      let body;
      try {
        const response = await fetch(panel.dataset.url, {
          method: "POST",
          headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken(form) },
          body: key,
          credentials: "same-origin",
          signal: controller.signal,
        });
        body = await response.json();
        if (!response.ok) {
          status.textContent = body.error ? body.error.message : "The check failed.";
          return;
        }
      } catch (error) {
        if (error.name !== "AbortError") status.textContent = "The check could not run: " + error.message;
        return;
      }
      list.replaceChildren(...body.results.map((hit) => item(form, panel, hit)));
      status.textContent = body.results.length
        ? body.results.length + " possible duplicate" + (body.results.length === 1 ? "" : "s") + ", likeliest first."
        : "No bug like this one yet.";
    }

    function later() {
      clearTimeout(timer);
      timer = setTimeout(check, DEBOUNCE_MS);
    }
    title.addEventListener("input", later);
    if (description) description.addEventListener("input", later);
    const product = form.querySelector("#id_product");
    if (product) product.addEventListener("change", later);
    if (title.value.trim()) check();
  }

  document.addEventListener("DOMContentLoaded", function () {
    const panel = document.getElementById("duplicates-check");
    const form = document.getElementById("bug_form");
    if (!panel || !form || !form.querySelector("#id_title")) return;
    // Just under the fieldset that holds the title, where the eye is while typing it.
    form.querySelector("#id_title").closest("fieldset").after(panel);
    panel.hidden = false;
    start(form, panel);
  });
})();
