// Copy buttons: <button data-copy="ID" data-copied-label="Copied"> copies the value (or text)
// of the element with that id, then says so for two seconds. The clipboard API needs a secure
// context (HTTPS or localhost); elsewhere the field's text is selected and copied the old way.
(function () {
  "use strict";

  function copyFallback(field) {
    field.focus();
    if (field.select) field.select();
    try {
      return document.execCommand("copy");
    } catch (error) {
      return false;
    }
  }

  function copy(button) {
    var field = document.getElementById(button.dataset.copy);
    if (!field) return;
    var text = "value" in field ? field.value : field.textContent;
    var label = button.dataset.label || (button.dataset.label = button.textContent);
    function done(ok) {
      button.textContent = ok ? button.dataset.copiedLabel || "Copied" : "Press Ctrl+C to copy";
      if (!ok) copyFallback(field);
      window.setTimeout(function () {
        button.textContent = label;
      }, 2000);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        function () {
          done(true);
        },
        function () {
          done(copyFallback(field));
        }
      );
    } else {
      done(copyFallback(field));
    }
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy]");
    if (button) copy(button);
  });
})();
