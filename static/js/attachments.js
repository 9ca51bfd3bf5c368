// Images in the composer: attach by the button, by dropping files on the composer, or by
// pasting them. Files go to the upload view (which checks each by its content); the chips it
// returns carry hidden `attachment` ids that the send form takes along. When the model
// cannot read images the button is disabled and a drop or paste only shows why.
(function () {
  "use strict";

  function csrfToken() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (error) {
      return "";
    }
  }

  function init() {
    var composer = document.getElementById("composer");
    var input = document.getElementById("attach-input");
    var button = document.getElementById("attach-button");
    var notice = document.getElementById("attach-notice");
    if (!composer || !input || !button) return;
    var uploadUrl = composer.dataset.uploadUrl;
    var refusal = composer.dataset.imageRefusal || "";
    var busy = false;

    function say(text) {
      notice = document.getElementById("attach-notice");
      if (!notice) return;
      notice.textContent = "";
      if (!text) return;
      var box = document.createElement("p");
      box.className = "notice notice-error";
      box.textContent = text;
      notice.appendChild(box);
    }

    function upload(files) {
      var images = Array.prototype.slice.call(files || []);
      if (!images.length) return;
      if (refusal) {
        say(refusal);
        return;
      }
      if (busy) {
        say("Still uploading the previous images: try again in a moment.");
        return;
      }
      var body = new FormData();
      images.forEach(function (file) {
        body.append("images", file, file.name || "pasted-image");
      });
      busy = true;
      button.classList.add("is-busy");
      button.setAttribute("aria-busy", "true");
      say("");
      fetch(uploadUrl, {
        method: "POST",
        body: body,
        credentials: "same-origin",
        headers: { "X-CSRFToken": csrfToken(), "HX-Request": "true" },
      })
        .then(function (response) {
          var type = response.headers.get("Content-Type") || "";
          if (type.indexOf("text/html") !== 0 || response.status === 404) {
            throw new Error("The upload was refused (HTTP " + response.status + "). Reload the page and try again.");
          }
          return response.text();
        })
        .then(function (html) {
          window.htmx.swap("#attachments-pending", html, { swapStyle: "beforeend" });
        })
        .catch(function (error) {
          say(error && error.message ? error.message : "The upload failed: check your connection and try again.");
        })
        .finally(function () {
          busy = false;
          button.classList.remove("is-busy");
          button.removeAttribute("aria-busy");
          input.value = "";
        });
    }

    button.addEventListener("click", function () {
      if (!button.disabled) input.click();
    });
    input.addEventListener("change", function () {
      upload(input.files);
    });

    function hasFiles(event) {
      var types = event.dataTransfer ? event.dataTransfer.types : [];
      return Array.prototype.indexOf.call(types, "Files") >= 0;
    }
    composer.addEventListener("dragover", function (event) {
      if (!hasFiles(event)) return;
      event.preventDefault();
      event.dataTransfer.dropEffect = refusal ? "none" : "copy";
      composer.classList.add("is-dragover");
    });
    composer.addEventListener("dragleave", function (event) {
      if (!composer.contains(event.relatedTarget)) composer.classList.remove("is-dragover");
    });
    composer.addEventListener("drop", function (event) {
      if (!hasFiles(event)) return;
      event.preventDefault();
      composer.classList.remove("is-dragover");
      upload(event.dataTransfer.files);
    });
    // A file dropped just beside the composer must not make the browser leave the page to show it.
    document.addEventListener("dragover", function (event) {
      if (hasFiles(event) && !composer.contains(event.target)) event.preventDefault();
    });
    document.addEventListener("drop", function (event) {
      if (hasFiles(event) && !composer.contains(event.target)) event.preventDefault();
    });
    composer.addEventListener("paste", function (event) {
      var items = event.clipboardData ? event.clipboardData.items : [];
      var files = [];
      Array.prototype.forEach.call(items, function (item) {
        if (item.kind === "file") {
          var file = item.getAsFile();
          if (file) files.push(file);
        }
      });
      if (!files.length) return; // plain text pastes as usual
      event.preventDefault();
      upload(files);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
