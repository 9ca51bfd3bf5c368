// Draws the dashboard's Plotly figures. Each chart fragment carries its figure as JSON in its
// data-figure attribute (data, never run; htmx would drop a <script> element); htmx.onLoad
// draws every plot a swap brings in, so switching a chart's grouping redraws just that chart.
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

  document.addEventListener("DOMContentLoaded", function () {
    if (window.htmx) window.htmx.onLoad(draw);
    draw(document);
  });
})();
