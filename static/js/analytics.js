// Draws the dashboard's Plotly figures. Each chart fragment carries its figure as JSON in a
// <script type="application/json"> element (data, never run); htmx.onLoad draws every plot a
// swap brings in, so switching a chart's grouping redraws just that chart.
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
      var source = document.getElementById(el.dataset.figure);
      if (!source || el.dataset.drawn) return;
      var figure = JSON.parse(source.textContent);
      var name = el.dataset.figure.replace(/^figure-/, "");
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
