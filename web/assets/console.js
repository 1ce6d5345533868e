// The console's few scripts: the copy button and the password field of the
// share form, shown when the chosen device is untrusted.
document.addEventListener("DOMContentLoaded", function () {
  var copy = document.getElementById("copy");
  if (copy) {
    copy.addEventListener("click", function () {
      navigator.clipboard.writeText(copy.dataset.copy).then(function () {
        copy.textContent = "Copied";
      });
    });
  }
  var dev = document.getElementById("share-device");
  var pw = document.getElementById("share-password-label");
  if (dev && pw) {
    var update = function () {
      var opt = dev.options[dev.selectedIndex];
      pw.hidden = !(opt && opt.dataset.untrusted === "true");
    };
    dev.addEventListener("change", update);
    update();
  }
});
