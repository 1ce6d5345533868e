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
    var first = document.getElementById("share-password");
    var again = document.getElementById("share-password2");
    var update = function () {
      var opt = dev.options[dev.selectedIndex];
      pw.hidden = !(opt && opt.dataset.untrusted === "true");
      // Only a shown password is asked for.
      first.required = again.required = !pw.hidden;
    };
    var same = function () {
      again.setCustomValidity(first.value === again.value ? "" : "The two passwords differ.");
    };
    dev.addEventListener("change", update);
    first.addEventListener("input", same);
    again.addEventListener("input", same);
    update();
  }
  followNode();
});

// followNode keeps the page's live panels fresh, and says when the node
// cannot be reached. A panel is an element with hx-trigger="refresh" and
// data-refresh-on="Type ...": the event types after which it reloads. The
// body names the node's event stream (data-events, from
// data-events-since: the page shows the node as it was then) and
// data-poll, the milliseconds between polls of every panel while the
// stream is down; a node without a stream is only polled. The body's
// data-live says which is on: "stream", "poll", or "down" while the node
// does not answer; then the #offline banner shows, the panels are marked
// stale, and the node is asked again, sooner at first, until it answers.
// A session that ended (the node restarted, or it expired) sends the
// window to the login page: the node answers a panel's request with 401
// and HX-Redirect, which htmx follows.
function followNode() {
  var body = document.body;
  if (!body.dataset.poll || !window.htmx) {
    return;
  }
  var panels = Array.prototype.slice.call(document.querySelectorAll("[data-refresh-on]"));
  var types = {};
  panels.forEach(function (p) {
    p.dataset.refreshOn.split(/\s+/).forEach(function (t) {
      if (t) {
        types[t] = true;
      }
    });
  });
  types = Object.keys(types);
  var banner = document.getElementById("offline");

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

  var url = panels.length > 0 ? body.dataset.events : "";
  var since = body.dataset.eventsSince;
  var stream = null;
  var down = false;
  var retry = null;
  var delay = 1000;
  var probing = false;

  var login = function (to) {
    window.location.assign(to || "/login");
  };
  var mode = function () {
    return stream && stream.readyState === EventSource.OPEN ? "stream" : "poll";
  };
  var setDown = function () {
    if (!down) {
      down = true;
      body.dataset.live = "down";
      body.classList.add("stale");
      if (banner) {
        banner.hidden = false;
      }
    }
    clearTimeout(retry);
    retry = setTimeout(probe, delay);
    delay = Math.min(delay * 2, 10000);
  };
  var setUp = function () {
    delay = 1000;
    clearTimeout(retry);
    if (!down) {
      body.dataset.live = mode();
      return;
    }
    down = false;
    body.classList.remove("stale");
    if (banner) {
      banner.hidden = true;
    }
    body.dataset.live = mode();
    refreshAll();
    if (url && (!stream || stream.readyState === EventSource.CLOSED)) {
      open();
    }
  };
  // probe asks the node whether it is there and the session lives.
  var probe = function () {
    if (probing) {
      return;
    }
    probing = true;
    fetch("/fragments/alive", {headers: {"HX-Request": "true"}, cache: "no-store", credentials: "same-origin"}).then(function (r) {
      probing = false;
      if (r.status === 401) {
        login(r.headers.get("HX-Redirect"));
      } else if (r.ok) {
        setUp();
      } else {
        setDown();
      }
    }, function () {
      probing = false;
      setDown();
    });
  };

  var open = function () {
    stream = new EventSource(url + "?since=" + encodeURIComponent(since) + "&types=" + types.join(","));
    stream.addEventListener("open", function () {
      setUp();
    });
    stream.addEventListener("error", function () {
      if (!down) {
        body.dataset.live = "poll";
      }
      probe();
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

  // A panel's request that could not reach the node; one that did.
  body.addEventListener("htmx:sendError", setDown);
  body.addEventListener("htmx:afterRequest", function (e) {
    if (e.detail.successful) {
      setUp();
    }
  });
  // Never paste a whole page into a panel: a request redirected to the
  // login or setup page means the session is gone.
  body.addEventListener("htmx:beforeSwap", function (e) {
    var to = e.detail.xhr.responseURL ? new URL(e.detail.xhr.responseURL).pathname : "";
    if (to === "/login" || to === "/setup") {
      e.detail.shouldSwap = false;
      login(to);
    }
  });

  body.dataset.live = "poll";
  if (url) {
    open();
  }
  // While the stream is down the panels are polled (a page without
  // panels only asks whether the node is there). The browser reopens a
  // stream that broke by itself; one it gave up on (an HTTP error) is
  // opened again here, from the last event seen.
  setInterval(function () {
    if (down || (stream && stream.readyState === EventSource.OPEN)) {
      return;
    }
    if (panels.length > 0) {
      refreshAll();
    } else {
      probe();
    }
    if (stream && stream.readyState === EventSource.CLOSED) {
      open();
    }
  }, Number(body.dataset.poll) || 10000);
}
