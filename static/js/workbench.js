/* The annotator's workbench: keyboard shortcuts, draft autosave, the active-time counter
 * and the live diff of edited texts. The page works without this file; it only adds speed.
 *
 * Shortcuts are declared by the server: every form control with a shortcut carries
 * data-key="k" (or "Shift+M", "Shift+1"), and links or buttons the generic keys press carry
 * data-shortcut="skip" / "back" / "history" / "zoom" / "submit" / "overlay". Keys are read
 * from KeyboardEvent.code, the key's position, so they work on any keyboard layout.
 *
 * The CSP allows no eval and no inline code: nothing here builds code from strings or
 * writes server text as HTML except through DOMParser on the app's own fragments.
 */
(function () {
  "use strict";

  const AUTOSAVE_DELAY_MS = 1500;
  const TICK_MS = 1000;
  // Cells of the diff's LCS table; past this a change shows as one deletion and one insertion.
  const DIFF_CELL_LIMIT = 400000;
  const { keyName, isTyping, isOverlayKey, toggleOverlay } = window.QuireKeys;

  let activeMs = 0;
  let visibleSince = null;
  let autosaveTimer = null;
  let dirty = false;

  function workbenchForm() {
    return document.getElementById("workbench-form");
  }

  // Active time: counts only while the tab is visible ----------------------------------

  function currentActiveMs() {
    return activeMs + (visibleSince === null ? 0 : performance.now() - visibleSince);
  }

  function startClock() {
    const output = document.getElementById("active-time");
    activeMs = output ? parseInt(output.dataset.activeMs || "0", 10) || 0 : 0;
    visibleSince = document.visibilityState === "visible" ? performance.now() : null;
    tick();
  }

  function formatClock(milliseconds) {
    const total = Math.floor(milliseconds / 1000);
    const hours = Math.floor(total / 3600);
    const minutes = Math.floor((total % 3600) / 60);
    const seconds = String(total % 60).padStart(2, "0");
    return hours ? hours + ":" + String(minutes).padStart(2, "0") + ":" + seconds : minutes + ":" + seconds;
  }

  function writeActiveMs() {
    const form = workbenchForm();
    const input = form && form.querySelector('input[name="active_ms"]');
    if (input) {
      input.value = String(Math.round(currentActiveMs()));
    }
  }

  function tick() {
    const output = document.getElementById("active-time");
    if (output) {
      output.textContent = formatClock(currentActiveMs());
    }
    writeActiveMs();
  }

  function onVisibilityChange() {
    if (document.visibilityState === "visible") {
      if (visibleSince === null) {
        visibleSince = performance.now();
      }
      return;
    }
    if (visibleSince !== null) {
      activeMs += performance.now() - visibleSince;
      visibleSince = null;
    }
    saveDraft(true);
  }

  // Autosave -----------------------------------------------------------------------------

  function csrfToken() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (error) {
      return "";
    }
  }

  function scheduleAutosave() {
    const form = workbenchForm();
    if (!form || form.dataset.autosave !== "on") {
      return;
    }
    dirty = true;
    clearTimeout(autosaveTimer);
    autosaveTimer = setTimeout(function () {
      saveDraft(false);
    }, AUTOSAVE_DELAY_MS);
  }

  function cancelAutosave() {
    clearTimeout(autosaveTimer);
    autosaveTimer = null;
    dirty = false;
  }

  function saveDraft(leaving) {
    const form = workbenchForm();
    if (!form || !dirty || form.dataset.autosave !== "on") {
      return;
    }
    cancelAutosave();
    writeActiveMs();
    fetch(form.dataset.draftUrl, {
      method: "POST",
      body: new FormData(form),
      headers: { "HX-Request": "true", "X-CSRFToken": csrfToken() },
      credentials: "same-origin",
      keepalive: leaving,
    })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("draft save answered " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        replaceFragments(html, form);
      })
      .catch(function () {
        if (form.isConnected) {
          dirty = true;
          setDraftStatus("Not saved yet: the draft is saved again with your next change.");
        }
      });
  }

  function setDraftStatus(text) {
    const status = document.getElementById("draft-status");
    if (status) {
      status.textContent = text;
    }
  }

  // The draft fragment holds elements with the ids of the ones they replace.
  function replaceFragments(html, form) {
    if (!form.isConnected) {
      return; // the annotator has moved on to another item
    }
    const parsed = new DOMParser().parseFromString(html, "text/html");
    Array.from(parsed.body.children).forEach(function (fresh) {
      const current = fresh.id && document.getElementById(fresh.id);
      if (current) {
        fresh.removeAttribute("hx-swap-oob");
        current.replaceWith(document.importNode(fresh, true));
      }
    });
  }

  // Live diff of edited texts ----------------------------------------------------------

  function tokens(text) {
    return text.match(/\s+|[^\s]+/g) || [];
  }

  function diffTokens(before, after) {
    const operations = [];
    let start = 0;
    while (start < before.length && start < after.length && before[start] === after[start]) {
      start += 1;
    }
    let endBefore = before.length;
    let endAfter = after.length;
    while (endBefore > start && endAfter > start && before[endBefore - 1] === after[endAfter - 1]) {
      endBefore -= 1;
      endAfter -= 1;
    }
    operations.push(["equal", before.slice(0, start)]);
    const removed = before.slice(start, endBefore);
    const added = after.slice(start, endAfter);
    if (removed.length * added.length > DIFF_CELL_LIMIT) {
      operations.push(["delete", removed], ["insert", added]);
    } else {
      middleDiff(removed, added).forEach(function (operation) {
        operations.push(operation);
      });
    }
    operations.push(["equal", before.slice(endBefore)]);
    return merged(operations);
  }

  function middleDiff(before, after) {
    const rows = before.length;
    const columns = after.length;
    const table = [];
    for (let i = 0; i <= rows; i += 1) {
      table.push(new Uint32Array(columns + 1));
    }
    for (let i = rows - 1; i >= 0; i -= 1) {
      for (let j = columns - 1; j >= 0; j -= 1) {
        table[i][j] = before[i] === after[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
      }
    }
    const operations = [];
    let i = 0;
    let j = 0;
    while (i < rows && j < columns) {
      if (before[i] === after[j]) {
        operations.push(["equal", [before[i]]]);
        i += 1;
        j += 1;
      } else if (table[i + 1][j] >= table[i][j + 1]) {
        operations.push(["delete", [before[i]]]);
        i += 1;
      } else {
        operations.push(["insert", [after[j]]]);
        j += 1;
      }
    }
    operations.push(["delete", before.slice(i)], ["insert", after.slice(j)]);
    return operations;
  }

  // Equal runs and changes (removed, added); the space between two changed words joins
  // the change, as on the server, so "the passage" -> "Figure 2" reads as one edit.
  function merged(operations) {
    const runs = [];
    operations.forEach(function (operation) {
      const text = operation[1].join("");
      if (!text) {
        return;
      }
      if (operation[0] === "equal") {
        runs.push(["equal", text, text]);
      } else {
        runs.push(["change", operation[0] === "delete" ? text : "", operation[0] === "insert" ? text : ""]);
      }
    });
    const joined = [];
    runs.forEach(function (run, index) {
      let kind = run[0];
      const betweenChanges =
        index > 0 && index < runs.length - 1 && runs[index - 1][0] === "change" && runs[index + 1][0] === "change";
      if (kind === "equal" && betweenChanges && !run[1].trim()) {
        kind = "change";
      }
      const last = joined[joined.length - 1];
      if (kind === "change" && last && last[0] === "change") {
        last[1] += run[1];
        last[2] += run[2];
      } else if (kind === "equal" && last && last[0] === "equal") {
        last[1] += run[1];
        last[2] += run[2];
      } else {
        joined.push([kind, run[1], run[2]]);
      }
    });
    return joined;
  }

  function renderDiff(container, original, changed) {
    container.replaceChildren();
    if (original === changed) {
      const same = document.createElement("span");
      same.className = "muted";
      same.textContent = "No change.";
      container.appendChild(same);
      return;
    }
    diffTokens(tokens(original), tokens(changed)).forEach(function (run) {
      if (run[0] === "equal") {
        container.appendChild(document.createTextNode(run[1]));
        return;
      }
      [["del", run[1]], ["ins", run[2]]].forEach(function (part) {
        if (part[1]) {
          const mark = document.createElement(part[0]);
          mark.textContent = part[1];
          container.appendChild(mark);
        }
      });
    });
  }

  function updateDiffs(field) {
    if (!field.name) {
      return;
    }
    document.querySelectorAll('[data-diff-for="' + CSS.escape(field.name) + '"]').forEach(function (container) {
      renderDiff(container, container.dataset.diffOriginal || "", field.value);
    });
  }

  // Keyboard -----------------------------------------------------------------------------

  // "KeyK" -> "k", with Shift "Shift+K"; "Digit1" / "Numpad1" -> "1", with Shift "Shift+1".



  function pressShortcut(name) {
    const element = document.querySelector('[data-shortcut="' + name + '"]');
    if (!element || (element.matches && element.matches(":disabled"))) {
      return false;
    }
    element.click();
    return true;
  }

  function toggleGuidelines() {
    const panel = document.getElementById("guideline-panel");
    if (!panel) {
      return false;
    }
    panel.open = !panel.open;
    return true;
  }


  const GENERIC_KEYS = {
    s: function () {
      return pressShortcut("skip");
    },
    b: function () {
      return pressShortcut("back");
    },
    h: function () {
      return pressShortcut("history");
    },
    g: toggleGuidelines,
    z: function () {
      return pressShortcut("zoom");
    },
    "Shift+F": function () {
      // Open the flag box and put the cursor in its note; Tab then Enter sends it.
      const summary = document.querySelector('[data-shortcut="flag"]');
      const note = document.getElementById("flag-note");
      if (!summary || !note) {
        return false;
      }
      summary.closest("details").open = true;
      note.focus();
      return true;
    },
  };

  function activate(control) {
    control.scrollIntoView({ block: "nearest" });
    if (control.type === "radio" || control.type === "checkbox") {
      control.click();
      return;
    }
    control.focus();
    if (control.tagName === "TEXTAREA" || (control.tagName === "INPUT" && isTyping(control))) {
      // Type on at the end of the text, not before it.
      const end = control.value.length;
      try {
        control.setSelectionRange(end, end);
      } catch (error) {
        // Number and email boxes have no caret position to set; focus is enough there.
      }
    }
  }

  function onKeyDown(event) {
    if (event.defaultPrevented || event.isComposing) {
      return;
    }
    const overlay = document.getElementById("shortcut-overlay");
    if (overlay && overlay.open) {
      if (isOverlayKey(event)) {
        event.preventDefault();
        overlay.close();
      }
      return; // Escape closes the dialog by itself
    }
    const target = event.target;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      if (pressShortcut("submit")) {
        event.preventDefault();
      }
      return;
    }
    if (isTyping(target)) {
      if (event.key === "Escape") {
        event.preventDefault();
        target.blur();
      }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) {
      return;
    }
    if (event.key === "Enter") {
      // A focused link, button or summary keeps its own Enter.
      if (target.closest && target.closest("a, button, summary")) {
        return;
      }
      if (pressShortcut("submit")) {
        event.preventDefault();
      }
      return;
    }
    if (isOverlayKey(event)) {
      event.preventDefault();
      toggleOverlay();
      return;
    }
    const name = keyName(event);
    if (!name || event.repeat) {
      return;
    }
    const generic = GENERIC_KEYS[name];
    if (generic && generic()) {
      event.preventDefault();
      return;
    }
    const form = workbenchForm();
    const control = form && form.querySelector('[data-key="' + CSS.escape(name) + '"]');
    if (!control || control.matches(":disabled")) {
      return;
    }
    event.preventDefault();
    activate(control);
  }

  // Wiring -------------------------------------------------------------------------------

  function inWorkbenchForm(element) {
    return Boolean(element && element.closest && element.closest("#workbench-form"));
  }

  function onFormEdit(event) {
    if (!inWorkbenchForm(event.target)) {
      return;
    }
    if (event.type === "input") {
      updateDiffs(event.target);
    }
    scheduleAutosave();
  }

  // Every way of leaving the form (submit, skip, save draft) sends the time so far and
  // makes a pending autosave unnecessary.
  function onFormLeave(event) {
    const button = event.target.closest && event.target.closest("button[type=submit]");
    if ((event.type === "submit" && event.target.id === "workbench-form") || (button && inWorkbenchForm(button))) {
      writeActiveMs();
      cancelAutosave();
    }
  }

  function onClick(event) {
    const opener = event.target.closest && event.target.closest('[data-shortcut="overlay"]');
    if (opener) {
      event.preventDefault();
      toggleOverlay();
    }
  }

  // htmx leaves the page as it was when a request fails; say so instead of doing nothing.
  function onRequestFailed(event) {
    const status = event.detail && event.detail.xhr ? event.detail.xhr.status : 0;
    setDraftStatus(
      status
        ? "The server refused that (" + status + "). Reload the page to see where things stand."
        : "No answer from the server; check the connection and try again.",
    );
  }

  function onContentLoaded(event) {
    const loaded = event.target;
    if (loaded && (loaded.id === "workbench" || (loaded.querySelector && loaded.querySelector("#active-time")))) {
      cancelAutosave();
      startClock();
    }
  }

  document.addEventListener("keydown", onKeyDown);
  document.addEventListener("input", onFormEdit);
  document.addEventListener("change", onFormEdit);
  document.addEventListener("submit", onFormLeave, true);
  document.addEventListener("click", onFormLeave, true);
  document.addEventListener("click", onClick);
  document.addEventListener("visibilitychange", onVisibilityChange);
  document.addEventListener("htmx:load", onContentLoaded);
  document.addEventListener("htmx:responseError", onRequestFailed);
  document.addEventListener("htmx:sendError", onRequestFailed);
  setInterval(tick, TICK_MS);
  startClock();
})();
