// Applies the remembered theme before the page paints (no flash). The toggle lives in console.js.
(function () {
  try {
    var theme = localStorage.getItem("memconsole-theme");
    if (theme === "dark" || theme === "light") {
      document.documentElement.setAttribute("data-theme", theme);
    }
  } catch (e) {
    /* storage may be blocked: follow the system preference */
  }
})();
