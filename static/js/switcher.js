// The quick switcher: ⌘K / Ctrl+K opens a dialog that searches the user's conversations as they
// type (htmx asks /chat/switch/, the same search as the list's); ↑ and ↓ choose, Enter opens,
// Escape closes. An Enter typed before the results for what the box holds have arrived waits
// for them (else it would open the first of the previous results: the most recent
// conversation). Without JavaScript the list page's search box does the same.
(function () {
  "use strict";

  function options(dialog) {
    return Array.prototype.slice.call(dialog.querySelectorAll("#switcher-results [role=option]"));
  }

  function activate(dialog, option) {
    options(dialog).forEach(function (other) {
      var on = other === option;
      other.classList.toggle("is-active", on);
      other.setAttribute("aria-selected", String(on));
    });
    var input = dialog.querySelector("input");
    if (option) {
      input.setAttribute("aria-activedescendant", option.id);
      option.scrollIntoView({ block: "nearest" });
    } else {
      input.removeAttribute("aria-activedescendant");
    }
  }

  // The query the results shown answer (each result carries it); null before any arrived.
  function answered(dialog) {
    var first = dialog.querySelector("#switcher-results li");
    return first ? first.getAttribute("data-query") : null;
  }

  function go(option) {
    var link = option && option.querySelector("a");
    if (link) window.location.assign(link.href);
  }

  function open(dialog) {
    if (dialog.open) return;
    var input = dialog.querySelector("input");
    dialog.showModal();
    input.select();
    // The most recent conversations (or what the box still holds) before anything is typed.
    if (window.htmx) window.htmx.trigger(input, "switcher:open");
  }

  function init() {
    var dialog = document.getElementById("quick-switcher");
    if (!dialog) return;
    var input = dialog.querySelector("input");
    var enterWaiting = false; // Enter was pressed before the results for the box's text came

    document.addEventListener("keydown", function (event) {
      if ((event.metaKey || event.ctrlKey) && !event.altKey && !event.shiftKey && event.key.toLowerCase() === "k") {
        event.preventDefault(); // the browser's own Ctrl+K (search) stays out of the way
        open(dialog);
      }
    });
    // Without JavaScript the link goes to the list's search box instead.
    document.querySelectorAll("[data-open-switcher]").forEach(function (link) {
      link.addEventListener("click", function (event) {
        event.preventDefault();
        open(dialog);
      });
    });

    input.addEventListener("keydown", function (event) {
      var all = options(dialog);
      var current = dialog.querySelector("#switcher-results .is-active");
      var index = all.indexOf(current);
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        if (!all.length) return;
        var step = event.key === "ArrowDown" ? 1 : -1;
        activate(dialog, all[(index + step + all.length) % all.length]);
      } else if (event.key === "Enter") {
        event.preventDefault();
        if (answered(dialog) === input.value.trim()) go(current);
        else enterWaiting = true;
      } else if (event.key === "Escape") {
        event.preventDefault(); // spent here: no drawer closes, no answer stops (layout.js, chat.js)
        dialog.close();
      }
    });

    dialog.addEventListener("close", function () {
      enterWaiting = false;
    });
    dialog.addEventListener("click", function (event) {
      if (event.target === dialog) dialog.close(); // a click on the backdrop
    });
    dialog.addEventListener("mousemove", function (event) {
      var option = event.target instanceof Element && event.target.closest("[role=option]");
      if (option) activate(dialog, option);
    });
    document.body.addEventListener("htmx:afterSwap", function (event) {
      if (event.detail.target && event.detail.target.id === "switcher-results") {
        activate(dialog, options(dialog)[0] || null);
        if (enterWaiting && answered(dialog) === input.value.trim()) {
          enterWaiting = false;
          go(options(dialog)[0]);
        }
      }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
