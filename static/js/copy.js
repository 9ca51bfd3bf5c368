// Copy buttons: <button data-copy="ID" data-copied-label="Copied"> copies the value (or text)
// of the element with that id, then says so for two seconds. The clipboard API needs a secure
// context (HTTPS or localhost); elsewhere the field's text is selected and copied the old way.
//
// <button data-copy-url="URL"> copies what URL answers (a conversation's JSON, too large to
// keep in the page): the text is handed to the clipboard as a promise, so the browser still
// counts the click as what allowed the copy. Without the clipboard API it says so instead.
//
// Code blocks in rendered answers (`.markdown pre`) get a Copy button of their own, also those
// that arrive later over the chat socket (a MutationObserver watches the page).
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

  // Says `text` on the button for two seconds.
  function say(button, text) {
    var label = button.dataset.label || (button.dataset.label = button.textContent);
    button.textContent = text;
    window.setTimeout(function () {
      button.textContent = label;
    }, 2000);
  }

  function copy(button) {
    var field = document.getElementById(button.dataset.copy);
    if (!field) return;
    var text = "value" in field ? field.value : field.textContent;
    function done(ok) {
      say(button, ok ? button.dataset.copiedLabel || "Copied" : "Press Ctrl+C to copy");
      if (!ok) copyFallback(field);
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

  function copyFromUrl(button) {
    var fallback = button.dataset.copyFailedLabel || "Copy failed";
    if (!(navigator.clipboard && window.isSecureContext)) {
      say(button, fallback);
      return;
    }
    var text = fetch(button.dataset.copyUrl, { credentials: "same-origin" }).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.text();
    });
    var written = window.ClipboardItem
      ? navigator.clipboard.write([
          new ClipboardItem({
            "text/plain": text.then(function (body) {
              return new Blob([body], { type: "text/plain" });
            }),
          }),
        ])
      : text.then(function (body) {
          return navigator.clipboard.writeText(body);
        });
    written.then(
      function () {
        say(button, button.dataset.copiedLabel || "Copied");
      },
      function () {
        say(button, fallback);
      }
    );
  }

  document.addEventListener("click", function (event) {
    var fromUrl = event.target.closest("[data-copy-url]");
    if (fromUrl) return copyFromUrl(fromUrl);
    var button = event.target.closest("[data-copy]");
    if (button) copy(button);
  });

  var codeBlocks = 0;

  // The button sits in a wrapper beside the <pre>, so the code's text stays the code alone.
  function addCodeButtons(root) {
    root.querySelectorAll(".markdown pre:not([data-copyable])").forEach(function (pre) {
      pre.dataset.copyable = "";
      if (!pre.id) pre.id = "code-block-" + ++codeBlocks;
      var wrapper = document.createElement("div");
      wrapper.className = "answer-code";
      pre.parentNode.insertBefore(wrapper, pre);
      wrapper.appendChild(pre);
      var button = document.createElement("button");
      button.type = "button";
      button.className = "copy-button copy-code";
      button.dataset.copy = pre.id;
      button.dataset.copiedLabel = "Copied";
      button.setAttribute("aria-label", "Copy code");
      button.textContent = "Copy";
      wrapper.appendChild(button);
    });
  }

  function init() {
    addCodeButtons(document);
    new MutationObserver(function (changes) {
      changes.forEach(function (change) {
        change.addedNodes.forEach(function (node) {
          if (node.nodeType === Node.ELEMENT_NODE) addCodeButtons(node.parentNode || node);
        });
      });
    }).observe(document.body, { childList: true, subtree: true });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
