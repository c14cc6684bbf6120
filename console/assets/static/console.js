// ladder console: progressive enhancement only. Every action works without
// this script; it prevents double submits and confirms a pin.
(function () {
  "use strict";
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (form.method && form.method.toLowerCase() === "post") {
      if (form.dataset.sent === "1") { ev.preventDefault(); return; }
      form.dataset.sent = "1";
      var btns = form.querySelectorAll("button[type=submit]");
      for (var i = 0; i < btns.length; i++) { btns[i].setAttribute("aria-busy", "true"); }
    }
  });
  window.addEventListener("pageshow", function () {
    var forms = document.querySelectorAll("form[data-sent]");
    for (var i = 0; i < forms.length; i++) { delete forms[i].dataset.sent; }
  });
})();
