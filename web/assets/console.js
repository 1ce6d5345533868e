// The console's few scripts: the copy button, the password field of the
// share form (shown when the chosen device is untrusted), and the live
// panels.
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
  followNode();
});

// followNode keeps the page's live panels fresh. A panel is an element
// with hx-trigger="refresh" and data-refresh-on="Type ...": the event
// types after which it reloads. The body names the node's event stream
// (data-events, from data-events-since: the page shows the node as it was
// then) and data-poll, the milliseconds between polls of every panel while
// the stream is down; a node without a stream is only polled. The body's
// data-live says which is on: "stream" or "poll".
function followNode() {
  var panels = Array.prototype.slice.call(document.querySelectorAll("[data-refresh-on]"));
  var body = document.body;
  if (panels.length === 0 || !window.htmx) {
    return;
  }
  var types = {};
  panels.forEach(function (p) {
    p.dataset.refreshOn.split(/\s+/).forEach(function (t) {
      if (t) {
        types[t] = true;
      }
    });
  });
  types = Object.keys(types);

  // refresh reloads a panel soon, once for a burst of events.
  var refresh = function (p) {
    if (p.refreshQueued) {
      return;
    }
    p.refreshQueued = true;
    setTimeout(function () {
      p.refreshQueued = false;
      htmx.trigger(p, "refresh");
    }, 100);
  };
  var refreshAll = function () {
    panels.forEach(refresh);
  };

  var url = body.dataset.events;
  var since = body.dataset.eventsSince;
  var stream = null;
  var open = function () {
    stream = new EventSource(url + "?since=" + encodeURIComponent(since) + "&types=" + types.join(","));
    stream.addEventListener("open", function () {
      body.dataset.live = "stream";
    });
    stream.addEventListener("error", function () {
      body.dataset.live = "poll";
    });
    // Events missed: every panel may be stale.
    stream.addEventListener("Resync", function (e) {
      since = e.lastEventId;
      refreshAll();
    });
    types.forEach(function (t) {
      stream.addEventListener(t, function (e) {
        since = e.lastEventId;
        panels.forEach(function (p) {
          if (p.dataset.refreshOn.split(/\s+/).indexOf(t) >= 0) {
            refresh(p);
          }
        });
      });
    });
  };
  body.dataset.live = "poll";
  if (url) {
    open();
  }
  // While the stream is down the panels are polled. The browser reopens a
  // stream that broke by itself; one it gave up on (an HTTP error) is
  // opened again here, from the last event seen.
  setInterval(function () {
    if (stream && stream.readyState === EventSource.OPEN) {
      return;
    }
    refreshAll();
    if (stream && stream.readyState === EventSource.CLOSED) {
      open();
    }
  }, Number(body.dataset.poll) || 10000);
}
