// Drop a JUnit report on the upload box: it fills the file field and sends the form.
(function () {
  "use strict";
  const zone = document.querySelector("[data-drop-zone]");
  const form = document.getElementById("triage-form");
  const input = document.getElementById("triage-file");
  if (!zone || !form || !input) return;
  ["dragenter", "dragover"].forEach((name) =>
    zone.addEventListener(name, (event) => {
      event.preventDefault();
      zone.classList.add("dragging");
    }),
  );
  zone.addEventListener("dragleave", () => zone.classList.remove("dragging"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("dragging");
    if (!event.dataTransfer || !event.dataTransfer.files.length) return;
    input.files = event.dataTransfer.files;
    form.requestSubmit();
  });
})();
