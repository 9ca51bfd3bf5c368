// The few behaviours htmx does not cover on the chat page: Enter or Ctrl/⌘+Enter to send, Esc
// to stop a streaming answer, clearing the box once the server accepted the message, and
// keeping the newest text in view. #messages is looked up each time: switching branches or
// deleting a turn swaps it for a new element.
(function () {
  "use strict";

  function init() {
    var composer = document.getElementById("composer");
    var first = document.getElementById("messages");
    if (first) first.scrollTop = first.scrollHeight;
    if (!composer || !first) return;
    var input = composer.querySelector("textarea[name=message]");
    var sentFromComposer = false; // an edit or a regenerate starts a turn too: the draft stays
    composer.addEventListener("submit", function () {
      sentFromComposer = true;
    });

    function streaming() {
      var actions = document.getElementById("composer-actions");
      return Boolean(actions && actions.dataset.state === "streaming");
    }

    function send() {
      // An image-only message (no text) is allowed: attachments.js puts their ids in the form.
      var images = composer.querySelector("input[name=attachment]");
      if (!streaming() && (input.value.trim() || images)) composer.requestSubmit();
    }

    input.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        send();
      }
    });

    // Ctrl/⌘+Enter sends from anywhere in the composer (the attach button, an image chip).
    composer.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && event.target !== input) {
        event.preventDefault();
        send();
      }
    });

    // Esc stops the answer, unless it closes something first: layout.js closes an open drawer
    // (and says so with preventDefault); a dialog or the menu closes by itself.
    document.addEventListener("keydown", function (event) {
      if (event.key !== "Escape" || event.defaultPrevented || !streaming()) return;
      if (document.querySelector("dialog[open], details.drawer-panel[open], :popover-open")) return;
      var stop = document.getElementById("stop-button");
      if (stop) {
        event.preventDefault();
        stop.click();
      }
    });

    var stickToBottom = true;
    var wasStreaming = false;
    document.body.addEventListener("htmx:wsBeforeMessage", function () {
      var messages = document.getElementById("messages");
      stickToBottom = messages.scrollHeight - messages.scrollTop - messages.clientHeight < 120;
    });
    document.body.addEventListener("htmx:wsAfterMessage", function () {
      var messages = document.getElementById("messages");
      var now = streaming();
      if (now && !wasStreaming && sentFromComposer) input.value = ""; // the server took the message
      if (!now && wasStreaming) input.focus();
      sentFromComposer = false; // the first frame after a send answers it (Send waits for the turn)
      wasStreaming = now;
      if (stickToBottom) messages.scrollTop = messages.scrollHeight;
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
