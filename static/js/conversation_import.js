// The import page: a pasted document too large to go as a form field (the server reads fields
// up to DATA_UPLOAD_MAX_MEMORY_SIZE; files are not counted) is sent as a file instead, and one
// larger than an import reads is stopped here with the reason, the text still in the box.
(function () {
  "use strict";

  function init() {
    var form = document.getElementById("import-form");
    if (!form) return;
    var box = form.querySelector("textarea[name='text']");
    var file = form.querySelector("input[type='file'][name='file']");
    var tooLarge = document.getElementById("import-too-large");
    form.addEventListener("submit", function (event) {
      if (!box || !file || (file.files && file.files.length)) return; // a chosen file is read instead
      var size = new Blob([box.value]).size;
      if (size > Number(form.dataset.documentMax)) {
        event.preventDefault();
        tooLarge.hidden = false;
        box.focus();
        return;
      }
      tooLarge.hidden = true;
      if (size <= Number(form.dataset.pasteMax)) return;
      var files = new DataTransfer();
      files.items.add(new File([box.value], "pasted.json", { type: "application/json" }));
      file.files = files.files;
      box.removeAttribute("name"); // sent once, as the file; the server puts it back in the box
    });
    // Back to this page from the next one: the box is a field again.
    window.addEventListener("pageshow", function () {
      if (box) box.name = "text";
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
