// memconsole console: theme toggle, local times, bulk selection count, header menu, htmx error display.
// Everything here is an enhancement: every page works without it.
(function () {
  "use strict";

  var strings = document.getElementById("console-strings");
  function text(name) {
    return (strings && strings.dataset[name]) || "";
  }

  // --- theme ---------------------------------------------------------------------------------
  var darkQuery = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  function currentTheme() {
    var chosen = document.documentElement.getAttribute("data-theme");
    if (chosen === "dark" || chosen === "light") return chosen;
    return darkQuery && darkQuery.matches ? "dark" : "light";
  }
  function setupThemeToggle() {
    var button = document.getElementById("theme-toggle");
    if (!button) return;
    button.hidden = false;
    var sync = function () {
      button.setAttribute("aria-pressed", currentTheme() === "dark" ? "true" : "false");
    };
    sync();
    button.addEventListener("click", function () {
      var next = currentTheme() === "dark" ? "light" : "dark";
      document.documentElement.setAttribute("data-theme", next);
      try {
        localStorage.setItem("memconsole-theme", next);
      } catch (e) {
        /* not remembered, still applied */
      }
      sync();
    });
    if (darkQuery && darkQuery.addEventListener) darkQuery.addEventListener("change", sync);
  }

  // --- times in the browser's time zone (the title keeps UTC) --------------------------------
  function localizeTimes(root) {
    var nodes = (root || document).querySelectorAll("time[datetime]:not([data-localized])");
    for (var i = 0; i < nodes.length; i++) {
      var node = nodes[i];
      var date = new Date(node.getAttribute("datetime"));
      if (isNaN(date.getTime())) continue;
      node.textContent = date.toLocaleString(document.documentElement.lang || undefined, {
        year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
      });
      node.setAttribute("data-localized", "");
    }
  }

  // --- bulk selection --------------------------------------------------------------------------
  function updateSelectedCount() {
    var out = document.getElementById("selected-count");
    if (!out) return;
    var count = document.querySelectorAll('input[name="episode_ids"][form="bulk-form"]:checked').length;
    if (count === 0) out.textContent = text("selectedNone");
    else if (count === 1) out.textContent = text("selectedOne");
    else out.textContent = text("selectedMany").replace("%(count)s", String(count));
  }
  function setupSelectAll(root) {
    var boxes = (root || document).querySelectorAll("input[data-select-all]");
    for (var i = 0; i < boxes.length; i++) boxes[i].hidden = false;
    updateSelectedCount();
  }
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.matches && target.matches("input[data-select-all]")) {
      var table = target.closest("table");
      var rows = table ? table.querySelectorAll('input[name="episode_ids"]') : [];
      for (var i = 0; i < rows.length; i++) rows[i].checked = target.checked;
    }
    if (target.matches && target.matches('input[name="episode_ids"], input[data-select-all]')) updateSelectedCount();
  });
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("[data-dismiss-bulk]");
    if (!link) return;
    var region = document.getElementById("bulk-result");
    if (region && region.contains(link)) {
      event.preventDefault();
      region.innerHTML = "";
    }
  });

  // --- the header menu (a <details>): Escape or a click elsewhere closes it ---------------------
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    var menu = document.querySelector("details.menu[open]");
    if (!menu) return;
    menu.open = false;
    var summary = menu.querySelector("summary");
    if (summary && menu.contains(document.activeElement)) summary.focus();
  });
  document.addEventListener("click", function (event) {
    var menu = document.querySelector("details.menu[open]");
    if (menu && !menu.contains(event.target)) menu.open = false;
  });

  // --- htmx ------------------------------------------------------------------------------------
  function showError(message) {
    var banner = document.getElementById("error-region");
    if (!banner) return;
    banner.textContent = message;
    banner.hidden = false;
  }
  function clearError() {
    var banner = document.getElementById("error-region");
    if (banner) banner.hidden = true;
  }
  if (window.htmx) {
    // Bad input answers 400 with the form and its inline errors: swap it in like a success.
    window.htmx.config.responseHandling = [
      { code: "204", swap: false },
      { code: "[23]..", swap: true },
      { code: "400", swap: true, error: false },
      { code: "[45]..", swap: false, error: true },
      { code: "...", swap: false },
    ];
    window.htmx.onLoad(function (element) {
      localizeTimes(element);
      setupSelectAll(element);
    });
    document.body.addEventListener("htmx:beforeRequest", clearError);
    // A row action replaces its row, and with it the focused button: put keyboard users back in
    // that row (on its first action, or on its status line when the row has none left).
    document.body.addEventListener("htmx:afterSettle", function (event) {
      var replaced = event.detail.target;  // the row that was swapped out, detached by now
      if (!replaced || replaced.tagName !== "TR" || !replaced.id) return;
      var row = document.getElementById(replaced.id);
      var focused = document.activeElement;
      if (!row || (focused && focused !== document.body && document.body.contains(focused))) return;
      var target = row.querySelector(".actions button, .actions a[href]") || row.querySelector("[tabindex]");
      if (target) target.focus();
    });
    document.body.addEventListener("htmx:responseError", function (event) {
      var status = event.detail.xhr ? event.detail.xhr.status : 0;
      if (status === 403) showError(text("forbidden"));
      else if (status === 404) showError(text("notFound"));
      else showError(text("requestFailed"));
    });
    document.body.addEventListener("htmx:sendError", function () {
      showError(text("network"));
    });
  }

  function start() {
    setupThemeToggle();
    localizeTimes(document);
    setupSelectAll(document);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
