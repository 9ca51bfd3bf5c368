// Layout behaviours shared by every page, beyond what HTML does alone.
//
// Drawers: a <details class="drawer-panel"> whose open content is a side drawer (the chat
// page's Settings and Tools). Opening one closes the others (they share one place), Escape
// or the drawer's close button closes it, and focus goes back to its toggle. Drawers
// swapped in by htmx need nothing more: the listeners sit on the document.
//
// The top bar's menu is a native popover (base.html): here it only gets its button's
// aria-expanded kept in step, and is closed when the window grows past the width where the
// links show in the bar again.
(function () {
  "use strict";

  var NARROW = "(max-width: 900px)";

  function openDrawers() {
    return document.querySelectorAll("details.drawer-panel[open]");
  }

  function closeDrawer(panel) {
    panel.open = false;
    var toggle = panel.querySelector(":scope > summary");
    if (toggle) toggle.focus();
  }

  // `toggle` (details and popovers) does not bubble: listen in the capture phase.
  document.addEventListener(
    "toggle",
    function (event) {
      var target = event.target;
      if (target instanceof HTMLElement && target.id === "site-menu") {
        // Said explicitly for assistive technology that does not derive it from popovertarget.
        document.querySelectorAll('[popovertarget="site-menu"]').forEach(function (button) {
          button.setAttribute("aria-expanded", String(event.newState === "open"));
        });
        return;
      }
      if (!(target instanceof HTMLDetailsElement) || !target.classList.contains("drawer-panel") || !target.open) return;
      openDrawers().forEach(function (other) {
        if (other !== target) other.open = false;
      });
    },
    true
  );

  document.addEventListener("click", function (event) {
    var button = event.target instanceof Element && event.target.closest("[data-drawer-close]");
    var panel = button && button.closest("details.drawer-panel");
    if (panel) closeDrawer(panel);
  });

  document.addEventListener("keydown", function (event) {
    // An editor that used Escape itself (closing its completion list or search) prevents the default.
    if (event.key !== "Escape" || event.defaultPrevented) return;
    var menu = document.getElementById("site-menu");
    if (menu && menu.matches(":popover-open")) return; // this Escape closes the menu
    var panels = openDrawers();
    if (panels.length) {
      closeDrawer(panels[panels.length - 1]);
      event.preventDefault(); // this Escape is spent: it does not also stop an answer (chat.js)
    }
  });

  var narrow = window.matchMedia(NARROW);
  narrow.addEventListener("change", function () {
    var menu = document.getElementById("site-menu");
    if (!narrow.matches && menu && menu.matches(":popover-open")) menu.hidePopover();
  });
})();
