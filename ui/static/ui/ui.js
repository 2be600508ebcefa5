// QA Search staff UI: results as you type, keyboard navigation, the Ctrl/Cmd-K spotlight.
//
// The server renders every result, with or without this script. Here we only
// fetch the same URLs with an `X-UI-Fragment` header and move the returned
// nodes (escaped by the server's templates) into the page; no record text is
// ever put together as HTML in the browser.
(function () {
  "use strict";

  const DEBOUNCE_MS = 180;
  const QUERY_MIN = 2; // the contract's minimum query length
  const SPOTLIGHT_LIMIT = "8";
  // Parameters left at their defaults stay out of the URL, so shared links stay short.
  const DEFAULTS = { sort: "relevant", mode: "hybrid" };

  document.documentElement.classList.add("js");

  function debounce(fn, ms) {
    let timer;
    return function () {
      clearTimeout(timer);
      timer = setTimeout(fn, ms);
    };
  }

  async function fetchFragment(url, fragment, signal) {
    const response = await fetch(url, { headers: { "X-UI-Fragment": fragment }, signal, credentials: "same-origin" });
    const html = await response.text();
    return new DOMParser().parseFromString(html, "text/html").body;
  }

  function isTyping(element) {
    return element.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(element.tagName);
  }

  // -- the search page: results as you type -------------------------------------------------

  function searchUrl(form) {
    const params = new URLSearchParams();
    for (const [name, value] of new FormData(form)) {
      if (value === "" || DEFAULTS[name] === value) continue;
      params.append(name, value);
    }
    const query = params.toString();
    return new URL(form.action).pathname + (query ? "?" + query : "");
  }

  function liveSearch(form) {
    const input = form.querySelector("#query");
    const status = document.getElementById("search-status");
    let shown = location.pathname + location.search;
    let controller = null;

    async function run() {
      const query = input.value.trim();
      if (query.length > 0 && query.length < QUERY_MIN) return;
      const url = searchUrl(form);
      if (url === shown) return;
      shown = url;
      if (controller) controller.abort();
      controller = new AbortController();
      const region = document.getElementById("results-region");
      region.setAttribute("aria-busy", "true");
      let fresh;
      try {
        fresh = (await fetchFragment(url, "results", controller.signal)).querySelector("#results-region");
      } catch (error) {
        if (error.name === "AbortError") return;
        fresh = null;
      }
      if (!fresh) {
        location.assign(url); // logged out, or the network failed: let the browser show the page
        return;
      }
      const focused = region.contains(document.activeElement) ? document.activeElement.id : "";
      const filtersOpen = region.querySelector(".filters[open]") !== null;
      region.replaceWith(fresh);
      // Filters opened on a narrow screen stay open while they apply.
      if (filtersOpen && fresh.querySelector(".filters")) fresh.querySelector(".filters").open = true;
      if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
      history.replaceState(null, "", url);
      document.title = (query ? query + " · Search" : "Search") + " · QA Search";
      status.textContent = fresh.dataset.summary || "";
    }

    input.addEventListener("input", debounce(run, DEBOUNCE_MS));
    // A filter chip takes its field out of the query: the box shows the query that runs.
    form.addEventListener("click", function (event) {
      const chip = event.target.closest("[data-chip-query]");
      if (!chip || event.ctrlKey || event.metaKey || event.shiftKey) return;
      event.preventDefault();
      input.value = chip.dataset.chipQuery;
      input.focus();
      run();
    });
    form.addEventListener("change", function (event) {
      if (event.target !== input) run(); // filters, sort and mode apply at once
    });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      run();
    });
  }

  // -- the spotlight: quick search from any page --------------------------------------------

  function spotlight(dialog) {
    const form = dialog.querySelector("form");
    const input = dialog.querySelector("#spotlight-query");
    const results = dialog.querySelector("#spotlight-results");
    let controller = null;

    async function run() {
      const query = input.value.trim();
      if (controller) controller.abort();
      if (query.length < QUERY_MIN) {
        results.replaceChildren();
        return;
      }
      controller = new AbortController();
      const url = new URL(form.action);
      url.search = new URLSearchParams({ query: query, limit: SPOTLIGHT_LIMIT }).toString();
      try {
        const body = await fetchFragment(url, "spotlight", controller.signal);
        results.replaceChildren(...body.childNodes);
      } catch (error) {
        if (error.name !== "AbortError") throw error;
      }
    }

    input.addEventListener("input", debounce(run, DEBOUNCE_MS));
    dialog.addEventListener("click", function (event) {
      if (event.target === dialog) dialog.close(); // a click on the backdrop
    });
  }

  function openSpotlight() {
    const main = document.getElementById("query");
    const dialog = document.getElementById("spotlight");
    const input = main || (dialog && dialog.querySelector("#spotlight-query"));
    if (!input) return;
    if (!main && !dialog.open) dialog.showModal();
    input.focus();
    input.select();
  }

  // -- keyboard: arrows move between a search box and its results ----------------------------

  function listFor(input) {
    return input.id === "query"
      ? document.querySelector("#results-region [data-nav-list]")
      : document.getElementById("spotlight-results");
  }

  function inputFor(list) {
    return list.closest("dialog") ? document.getElementById("spotlight-query") : document.getElementById("query");
  }

  function onArrow(event) {
    const target = event.target;
    const down = event.key === "ArrowDown";
    if (target.id === "query" || target.id === "spotlight-query") {
      const list = listFor(target);
      const first = list && list.querySelector("[data-nav-item]");
      if (down && first) {
        event.preventDefault();
        first.focus();
      }
      return;
    }
    const list = target.closest("[data-nav-list]");
    if (!list || !target.matches("[data-nav-item]")) return;
    if (event.key === "Escape" && list.closest("dialog")) return; // the dialog closes itself
    const items = Array.from(list.querySelectorAll("[data-nav-item]"));
    const index = items.indexOf(target);
    event.preventDefault();
    if (event.key === "Escape" || (!down && index === 0)) {
      inputFor(list).focus();
    } else {
      const next = items[index + (down ? 1 : -1)];
      if (next) next.focus();
    }
  }

  document.addEventListener("keydown", function (event) {
    if ((event.ctrlKey || event.metaKey) && event.key.toLowerCase() === "k") {
      event.preventDefault();
      openSpotlight();
    } else if (event.key === "/" && !isTyping(event.target)) {
      event.preventDefault();
      openSpotlight();
    } else if (["ArrowDown", "ArrowUp", "Escape"].includes(event.key)) {
      onArrow(event);
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    const form = document.querySelector("[data-live-search]");
    if (form) liveSearch(form);
    const dialog = document.getElementById("spotlight");
    if (dialog) spotlight(dialog);
    for (const button of document.querySelectorAll("[data-spotlight-open]")) {
      button.addEventListener("click", openSpotlight);
    }
  });
})();
