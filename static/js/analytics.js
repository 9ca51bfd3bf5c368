// The usage pages' behaviour: draws the dashboard's Plotly figures, and applies the filter form
// as soon as a control changes.
//
// Figures: each chart fragment carries its figure as JSON in its data-figure attribute (data,
// never run; htmx would drop a <script> element); htmx.onLoad draws every plot a swap brings
// in, so switching a chart's grouping redraws just that chart.
//
// Filters: the form (#filters) is a GET form with hx-get and hx-push-url, so submitting it
// swaps in the page's content and puts every control in the address. A preset, a select or
// the second of two dates submits it at once (no Apply needed); empty fields are left out of
// the request so the address stays readable. A chart's own choice (cost grouping, what-if
// card) pushes the dashboard's address from the server; the form's hidden copies of those
// choices, and the links that carry the query, follow the address here.
(function () {
  "use strict";

  var CONFIG = {
    responsive: true,
    displaylogo: false,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"],
  };

  function draw(root) {
    if (!window.Plotly || !root.querySelectorAll) return;
    var plots = root.matches && root.matches("[data-figure]") ? [root] : root.querySelectorAll("[data-figure]");
    Array.prototype.forEach.call(plots, function (el) {
      if (el.dataset.drawn) return;
      var figure = JSON.parse(el.dataset.figure);
      var name = el.dataset.name;
      var config = Object.assign({}, CONFIG, { toImageButtonOptions: { filename: "usage-" + name, format: "png", scale: 2 } });
      el.dataset.drawn = "1";
      window.Plotly.newPlot(el, figure.data, figure.layout, config);
    });
  }

  function applyOnChange(event) {
    var control = event.target;
    var form = control.form;
    if (!form || form.id !== "filters" || control.type === "hidden") return;
    var custom = form.querySelector('input[name="range"][value="custom"]');
    if (control.type === "date" && custom) custom.checked = true; // a date means a custom range
    var range = form.querySelector('input[name="range"]:checked');
    if (range && range.value === "custom" && !(form.elements.start.value && form.elements.end.value)) return;
    form.requestSubmit();
  }

  // Enter in a typed field (conversation, end user, tag, session) sends the form once. Left to
  // the browser it would send it twice, a change and then the implicit submission, and htmx's
  // hx-sync would abort the first with an error in the console.
  function submitOnEnter(event) {
    var control = event.target;
    if (event.key !== "Enter" || control.type !== "text" || !control.form || control.form.id !== "filters") return;
    event.preventDefault();
    control.form.requestSubmit();
  }

  function leaveOutEmptyFields(event) {
    if (event.detail.elt.id !== "filters") return;
    var data = event.detail.formData;
    Array.from(new Set(data.keys())).forEach(function (name) {
      if (data.getAll(name).every(function (value) { return value === ""; })) data.delete(name);
    });
  }

  function followAddress() {
    var params = new URLSearchParams(window.location.search);
    ["group", "card"].forEach(function (name) {
      var input = document.getElementById("filter-" + name);
      if (input) input.value = params.get(name) || "";
    });
    params.delete("after");
    document.querySelectorAll("a[data-keep-query]").forEach(function (link) {
      link.search = params.toString();
    });
  }

  // The pages opt out of htmx's history snapshots (hx-history="false": they would restore dead
  // pictures of the charts), so Back and Forward miss: load the address they go to, as a
  // page. (htmx's own reload of a missed entry swaps in the body without cancelling the one
  // before, so three quick Backs could end on the first answer to arrive.)
  if (window.htmx) window.htmx.config.refreshOnHistoryMiss = true;

  document.addEventListener("DOMContentLoaded", function () {
    if (window.htmx) window.htmx.onLoad(draw);
    draw(document);
  });
  document.addEventListener("change", applyOnChange);
  document.addEventListener("keydown", submitOnEnter);
  document.addEventListener("htmx:configRequest", leaveOutEmptyFields);
  document.addEventListener("htmx:pushedIntoHistory", followAddress);
})();
