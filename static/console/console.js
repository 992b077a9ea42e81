// memconsole console: theme toggle, local times, bulk selection count, header menu, copy buttons,
// htmx error display.
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
  // The server shows times in the zone chosen on the Time zone page, else the browser's, which it
  // learns from this cookie; until it knows it (data-time-zone="server") the texts are rewritten here.
  function browserZone() {
    try {
      return Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    } catch (e) {
      return "";
    }
  }
  function reportBrowserZone() {
    var zone = browserZone();
    if (!zone) return;
    var cookie = "memconsole_browser_tz=" + encodeURIComponent(zone);
    if (document.cookie.split("; ").indexOf(cookie) === -1) {
      document.cookie = cookie + "; path=/; max-age=31536000; SameSite=Lax";
    }
  }
  function localizeTimes(root) {
    if (document.documentElement.getAttribute("data-time-zone") !== "server") return;
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

  // --- the header menu and the rows' action menus (<details>): Escape or a click elsewhere closes them
  var MENUS = "details.menu[open], details.row-menu[open]";
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    var menu = document.querySelector(MENUS);
    if (!menu) return;
    menu.open = false;
    var summary = menu.querySelector("summary");
    if (summary && menu.contains(document.activeElement)) summary.focus();
  });
  document.addEventListener("click", function (event) {
    var menus = document.querySelectorAll(MENUS);
    for (var i = 0; i < menus.length; i++) if (!menus[i].contains(event.target)) menus[i].open = false;
  });

  // --- copy buttons: <button data-copy="id"> copies the text of element #id ----------------------
  function setupCopyButtons(root) {
    var buttons = (root || document).querySelectorAll("button[data-copy]");
    for (var i = 0; i < buttons.length; i++) buttons[i].hidden = false;
  }
  function copyStatus(button, message) {
    var out = document.getElementById(button.getAttribute("aria-describedby") || "") ||
      document.getElementById("live-region");
    if (out) out.textContent = message;
  }
  function copyBySelecting(source) {
    var range = document.createRange();
    range.selectNodeContents(source);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    var copied = false;
    try {
      copied = document.execCommand("copy");
    } catch (e) {
      copied = false;
    }
    return copied;  // the text stays selected, ready for a manual copy when this failed
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button[data-copy]");
    if (!button) return;
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) return;
    var value = source.textContent.trim();
    var done = function () { copyStatus(button, text("copied")); };
    var fallback = function () {
      if (copyBySelecting(source)) done();
      else copyStatus(button, text("copyFailed"));
    };
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(value).then(done, fallback);
    else fallback();
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
  // The explanation an error response carries: the reason on a 400/503 fragment, the text of an
  // error page (403, 404, 500). Parsed, never inserted as HTML; empty when there is none.
  var MESSAGE_SELECTORS = ["[data-error-message]", "main [role=alert]", ".form-errors", "main h1 + p", "h1 + p"];
  function serverMessage(xhr) {
    var body = xhr && xhr.responseText;
    if (!body || !window.DOMParser) return "";
    var type = (xhr.getResponseHeader && xhr.getResponseHeader("Content-Type")) || "";
    if (type.indexOf("html") === -1) return "";
    var doc = new DOMParser().parseFromString(body, "text/html");
    for (var i = 0; i < MESSAGE_SELECTORS.length; i++) {
      var nodes = doc.querySelectorAll(MESSAGE_SELECTORS[i]);
      for (var j = 0; j < nodes.length; j++) {
        if (nodes[j].id === "error-region") continue;
        var message = nodes[j].textContent.replace(/\s+/g, " ").trim();
        if (message) return message;
      }
    }
    return "";
  }
  // A list that a failed GET would have refreshed no longer matches its filters: say so, and dim it
  // until the next successful swap replaces it.
  function markStale(event) {
    var detail = event.detail || {};
    var verb = detail.requestConfig ? detail.requestConfig.verb : "";
    var target = detail.target;
    if (verb !== "get" || !target || !target.classList || !target.classList.contains("swap-region")) return "";
    target.setAttribute("data-stale", "");
    return text("staleList");
  }
  if (window.htmx) {
    // Bad input answers 400 with the form and its inline errors: swap it in like a success.
    window.htmx.config.responseHandling = [
      { code: "204", swap: false },
      { code: "[23]..", swap: true },
      { code: "400", swap: true, error: false },
      // A profile saved meanwhile by someone else answers 409 with their change and the form to re-apply.
      { code: "409", swap: true, error: false },
      { code: "[45]..", swap: false, error: true },
      { code: "...", swap: false },
    ];
    window.htmx.onLoad(function (element) {
      localizeTimes(element);
      setupSelectAll(element);
      setupCopyButtons(element);
    });
    document.body.addEventListener("htmx:afterSwap", function (event) {
      var target = event.detail.target;
      if (target && target.removeAttribute) target.removeAttribute("data-stale");
    });
    document.body.addEventListener("htmx:beforeRequest", clearError);
    // The language switcher comes back to the page as it is now: htmx may have pushed a filtered or
    // later page into the address bar since the page was rendered.
    function followAddress() {
      var next = document.querySelector(".language-form input[name=next]");
      if (next) next.value = window.location.pathname + window.location.search;
    }
    document.body.addEventListener("htmx:pushedIntoHistory", followAddress);
    document.body.addEventListener("htmx:replacedInHistory", followAddress);
    // A form confirmed by typing a value again (erasure) asks "are you sure?" only once the typed
    // value matches: otherwise it goes straight to the server, which says what is wrong with it.
    document.body.addEventListener("htmx:confirm", function (event) {
      var form = event.target && event.target.closest ? event.target.closest("form[data-confirm-typed]") : null;
      if (!form || !event.detail.question) return;
      var typed = form.querySelector("[name=confirmation]");
      if (typed && typed.value.trim() !== form.getAttribute("data-confirm-typed")) {
        event.preventDefault();
        event.detail.issueRequest(true);
      }
    });
    // A bulk preview (or its result) appears above the list: take keyboard users to it.
    document.body.addEventListener("htmx:afterSettle", function (event) {
      var target = event.detail.target;
      if (!target || target.id !== "bulk-result") return;
      var heading = target.querySelector("h2");
      if (!heading) return;
      heading.setAttribute("tabindex", "-1");
      heading.focus();
    });
    // A row action replaces its row, and with it the focused button: put keyboard users back in
    // that row (on its first action, or on its status line when the row has none left).
    document.body.addEventListener("htmx:afterSettle", function (event) {
      var replaced = event.detail.target;  // the row that was swapped out, detached by now
      if (!replaced || replaced.tagName !== "TR" || !replaced.id) return;
      var row = document.getElementById(replaced.id);
      var focused = document.activeElement;
      if (!row || (focused && focused !== document.body && document.body.contains(focused))) return;
      var target = row.querySelector("button.undo, .actions summary, .actions button, .actions a[href]") ||
        row.querySelector("[tabindex]");
      if (target) target.focus();
    });
    document.body.addEventListener("htmx:responseError", function (event) {
      var xhr = event.detail.xhr;
      var status = xhr ? xhr.status : 0;
      var message = serverMessage(xhr);
      if (!message) {
        if (status === 403) message = text("forbidden");
        else if (status === 404) message = text("notFound");
        else message = text("requestFailed");
      }
      var stale = markStale(event);
      showError(stale ? message + " " + stale : message);
    });
    document.body.addEventListener("htmx:sendError", function (event) {
      var stale = markStale(event);
      showError(stale ? text("network") + " " + stale : text("network"));
    });
  }

  // "Back to the episode list" goes back to the list as the user left it (its filters and page),
  // when they came from it.
  function setupBackLinks(root) {
    var links = root.querySelectorAll ? root.querySelectorAll("a[data-back-to-list]") : [];
    if (!links.length || !document.referrer) return;
    var from;
    try { from = new URL(document.referrer); } catch (e) { return; }
    for (var i = 0; i < links.length; i++) {
      var link = new URL(links[i].href, window.location.href);
      if (from.origin === link.origin && from.pathname === link.pathname && from.search) {
        links[i].href = from.pathname + from.search;
      }
    }
  }

  function start() {
    setupBackLinks(document);
    reportBrowserZone();
    setupThemeToggle();
    localizeTimes(document);
    setupSelectAll(document);
    setupCopyButtons(document);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
