// Progressive enhancement for the report's tables: click a header to sort its table, type in
// the box above the per-cell table to filter its rows. The page is complete without it.
document.addEventListener("DOMContentLoaded", function () {
  function key(text) {
    var t = text.replace(/[,\s]/g, "");
    var m = t.match(/^[-+]?\d*\.?\d+(e[-+]?\d+)?/i);
    return m ? parseFloat(m[0]) : null;
  }
  function sortBy(table, col, th) {
    var rows = Array.prototype.slice.call(table.rows, 1);
    var down = th.getAttribute("aria-sort") !== "descending";
    rows.sort(function (a, b) {
      var x = a.cells[col] ? a.cells[col].textContent : "", y = b.cells[col] ? b.cells[col].textContent : "";
      var kx = key(x), ky = key(y), r;
      if (kx !== null && ky !== null) { r = kx - ky; } else if (kx !== null) { r = -1; } else if (ky !== null) { r = 1; }
      else { r = x.localeCompare(y); }
      return down ? -r : r;
    });
    Array.prototype.forEach.call(table.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", down ? "descending" : "ascending");
    var body = rows.length ? rows[0].parentNode : null;
    rows.forEach(function (r) { body.appendChild(r); });
  }
  Array.prototype.forEach.call(document.querySelectorAll("table"), function (table) {
    if (table.rows.length < 3) { return; }
    Array.prototype.forEach.call(table.rows[0].cells, function (th, col) {
      th.className += " sortable";
      th.title = "sort by this column";
      th.addEventListener("click", function () { sortBy(table, col, th); });
    });
  });
  var cells = document.getElementById("cells-table");
  if (cells) {
    var box = document.createElement("input");
    box.type = "search";
    box.placeholder = "filter cells (e.g. resnet50 train)";
    box.id = "cells-filter";
    box.addEventListener("input", function () {
      var words = box.value.toLowerCase().split(/\s+/).filter(Boolean);
      Array.prototype.slice.call(cells.rows, 1).forEach(function (row) {
        var text = row.textContent.toLowerCase();
        row.style.display = words.every(function (w) { return text.indexOf(w) >= 0; }) ? "" : "none";
      });
    });
    cells.parentNode.parentNode.insertBefore(box, cells.parentNode);
  }
});
