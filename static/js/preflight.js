// The composer's pre-flight cost (#preflight) asks the server again when what it depends on
// changes besides the typed text (its own hx-trigger follows the text): an answer that ends
// (the history grew), another branch shown or a turn deleted, images added or removed, the
// settings, tools or variables saved.
(function () {
  "use strict";

  function refresh() {
    var line = document.getElementById("preflight");
    if (line && window.htmx) window.htmx.trigger(line, "preflight-refresh");
  }

  function init() {
    if (!document.getElementById("preflight")) return;
    var wasStreaming = false;
    document.body.addEventListener("htmx:wsAfterMessage", function () {
      var actions = document.getElementById("composer-actions");
      var streaming = Boolean(actions && actions.dataset.state === "streaming");
      if (wasStreaming && !streaming) refresh();
      wasStreaming = streaming;
    });
    document.body.addEventListener("htmx:afterSettle", function (event) {
      var target = event.detail && event.detail.target;
      var id = target && target.id;
      if (id === "composer-settings" || id === "tools-panel" || id === "variables-panel" || id === "messages") refresh();
    });
    var pending = document.getElementById("attachments-pending");
    if (pending) new MutationObserver(refresh).observe(pending, { childList: true });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
