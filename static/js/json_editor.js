// JSON editors: every <textarea data-json-editor> becomes a CodeMirror 6 editor with JSON
// highlighting and parse-error marks (vendor/codemirror-*.min.js, global PlaygroundCodeMirror).
// The textarea stays in the form, hidden, and holds the editor's text after every change, so
// what is submitted (a plain POST or htmx) is always the textarea's value; with JavaScript off
// it is simply a textarea. Content swapped in by htmx is enhanced too.
//
// Optional attributes on the textarea: `disabled` or `readonly` (a read-only editor),
// `data-json-editor-rows` (minimum height in lines, default the textarea's rows).
(function () {
  "use strict";

  var CM = window.PlaygroundCodeMirror;

  // An empty editor means "none" (no tools, no schema): it is not a JSON error.
  function jsonLinter() {
    var parse = CM.jsonParseLinter();
    return function (view) {
      return /\S/.test(view.state.doc.toString()) ? parse(view) : [];
    };
  }

  function labelText(textarea) {
    if (textarea.getAttribute("aria-label")) return textarea.getAttribute("aria-label");
    var label = textarea.id && document.querySelector('label[for="' + textarea.id + '"]');
    return label ? label.textContent.trim() : "JSON";
  }

  function enhance(textarea) {
    if (!CM || textarea.dataset.jsonEditorReady) return;
    textarea.dataset.jsonEditorReady = "1";
    var readOnly = textarea.disabled || textarea.readOnly;
    var rows = parseInt(textarea.dataset.jsonEditorRows || textarea.getAttribute("rows") || "8", 10);
    var host = document.createElement("div");
    host.className = "json-editor" + (readOnly ? " is-readonly" : "");
    host.style.setProperty("--json-editor-rows", String(rows)); // CSSOM: allowed by the CSP
    textarea.insertAdjacentElement("afterend", host);

    var view = new CM.EditorView({
      parent: host,
      state: CM.EditorState.create({
        doc: textarea.value,
        extensions: [
          CM.basicSetup,
          CM.json(),
          CM.linter(jsonLinter(), { delay: 300 }),
          CM.lintGutter(),
          CM.EditorView.lineWrapping, // long lines wrap in a narrow drawer instead of scrolling sideways
          CM.EditorState.readOnly.of(readOnly),
          CM.EditorView.editable.of(!readOnly),
          CM.EditorView.contentAttributes.of({ "aria-label": labelText(textarea) }),
          textarea.placeholder ? CM.placeholder(textarea.placeholder) : [],
          CM.EditorView.updateListener.of(function (update) {
            if (!update.docChanged) return;
            textarea.value = update.state.doc.toString();
            textarea.dispatchEvent(new Event("input", { bubbles: true }));
          }),
        ],
      }),
    });
    textarea.hidden = true;
    textarea.classList.add("json-editor-source");
    textarea.jsonEditorView = view; // for scripts (and tests) that set the text

    // A label click focuses the editor, as it focused the textarea.
    if (textarea.id) {
      document.querySelectorAll('label[for="' + textarea.id + '"]').forEach(function (label) {
        label.addEventListener("click", function (event) {
          event.preventDefault();
          view.focus();
        });
      });
    }
  }

  function enhanceAll(root) {
    if (!root.querySelectorAll) return;
    if (root.matches && root.matches("textarea[data-json-editor]")) enhance(root);
    root.querySelectorAll("textarea[data-json-editor]").forEach(enhance);
  }

  function init() {
    enhanceAll(document);
    document.body.addEventListener("htmx:load", function (event) {
      enhanceAll(event.target);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
