// The few behaviours htmx does not cover on the chat page: Enter to send, clearing the
// box once the server accepted the message, and keeping the newest text in view.
(function () {
  "use strict";

  function init() {
    var messages = document.getElementById("messages");
    var composer = document.getElementById("composer");
    if (messages) messages.scrollTop = messages.scrollHeight;
    if (!composer || !messages) return;
    var input = composer.querySelector("textarea[name=message]");

    function streaming() {
      var actions = document.getElementById("composer-actions");
      return Boolean(actions && actions.dataset.state === "streaming");
    }

    input.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        // An image-only message (no text) is allowed: attachments.js puts their ids in the form.
        var images = composer.querySelector("input[name=attachment]");
        if (!streaming() && (input.value.trim() || images)) composer.requestSubmit();
      }
    });

    var stickToBottom = true;
    var wasStreaming = false;
    document.body.addEventListener("htmx:wsBeforeMessage", function () {
      stickToBottom = messages.scrollHeight - messages.scrollTop - messages.clientHeight < 120;
    });
    document.body.addEventListener("htmx:wsAfterMessage", function () {
      var now = streaming();
      if (now && !wasStreaming) input.value = ""; // the server took the message
      if (!now && wasStreaming) input.focus();
      wasStreaming = now;
      if (stickToBottom) messages.scrollTop = messages.scrollHeight;
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
