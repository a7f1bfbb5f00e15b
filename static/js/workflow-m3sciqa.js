/* M3SciQA locality writing: search the anchor paper's reference cluster and pick the gold
 * reference from it, with the keyboard or the mouse.
 *
 * The page works without this file: the gold reference is a plain <select> in the form.
 * Here, "f" focuses the search box (outside text boxes), typing filters the list, the
 * arrow keys move the highlight, Enter picks the highlighted paper, and each row's button
 * picks that row. Picking sets the form's select and sends a change event, so the
 * workbench's autosave sees it. The server checks the pick against the cluster anyway.
 *
 * Everything works by event delegation on the document, so items swapped in by htmx need
 * no setup. No eval, no inline code, no HTML built from strings (CSP).
 */
(function () {
  "use strict";

  const SEARCH_ID = "m3sciqa-reference-search";
  const LIST_ID = "m3sciqa-references";
  const STATUS_ID = "m3sciqa-search-status";
  const SELECT_ID = "id_gold_reference";
  const ACTIVE = "m3sciqa-reference--active";
  const CHOSEN = "m3sciqa-reference--chosen";
  const { isTyping } = window.QuireKeys;

  function rows() {
    const list = document.getElementById(LIST_ID);
    return list ? Array.from(list.querySelectorAll("li[data-reference]")) : [];
  }

  function visibleRows() {
    return rows().filter(function (row) {
      return !row.hidden;
    });
  }

  function setStatus(text) {
    const status = document.getElementById(STATUS_ID);
    if (status) {
      status.textContent = text;
    }
  }

  // Every word of the query must occur in the row's id, title or abstract, in any case.
  function matches(row, words) {
    const haystack = (row.dataset.search || "").toLowerCase();
    return words.every(function (word) {
      return haystack.indexOf(word) !== -1;
    });
  }

  function highlight(row) {
    rows().forEach(function (other) {
      other.classList.toggle(ACTIVE, other === row);
    });
    if (row) {
      row.scrollIntoView({ block: "nearest" });
    }
  }

  function activeRow() {
    return visibleRows().find(function (row) {
      return row.classList.contains(ACTIVE);
    });
  }

  function filter(query) {
    const words = query.toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    rows().forEach(function (row) {
      row.hidden = !matches(row, words);
      if (!row.hidden) {
        shown += 1;
      }
    });
    highlight(visibleRows()[0] || null);
    const total = rows().length;
    setStatus(words.length ? shown + " of " + total + " papers match." : "All " + total + " papers shown.");
  }

  function markChosen() {
    const select = document.getElementById(SELECT_ID);
    const chosen = select ? select.value : "";
    rows().forEach(function (row) {
      row.classList.toggle(CHOSEN, Boolean(chosen) && row.dataset.reference === chosen);
    });
  }

  function pick(reference) {
    const select = document.getElementById(SELECT_ID);
    // A locked item's form sits in a disabled fieldset: the select is disabled through it.
    if (!select || select.matches(":disabled")) {
      return false;
    }
    const known = Array.from(select.options).some(function (option) {
      return option.value === reference;
    });
    if (!known) {
      return false;
    }
    select.value = reference;
    select.dispatchEvent(new Event("change", { bubbles: true }));
    markChosen();
    setStatus("Gold reference: " + reference + ".");
    return true;
  }

  function moveHighlight(step) {
    const shown = visibleRows();
    if (!shown.length) {
      return;
    }
    const index = shown.indexOf(activeRow());
    const next = index === -1 ? 0 : Math.min(Math.max(index + step, 0), shown.length - 1);
    highlight(shown[next]);
  }

  function overlayOpen() {
    const overlay = document.getElementById("shortcut-overlay");
    return Boolean(overlay && overlay.open);
  }

  function onSearchKey(event, search) {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      moveHighlight(event.key === "ArrowDown" ? 1 : -1);
    } else if (event.key === "Enter" && !event.ctrlKey && !event.metaKey) {
      event.preventDefault();
      const row = activeRow() || visibleRows()[0];
      if (row && pick(row.dataset.reference)) {
        // Back to single-key shortcuts, as after Escape.
        search.blur();
      }
    }
  }

  function onKeyDown(event) {
    if (event.defaultPrevented || event.isComposing) {
      return;
    }
    const search = document.getElementById(SEARCH_ID);
    if (!search) {
      return;
    }
    if (event.target === search) {
      onSearchKey(event, search);
      return;
    }
    const plain = !event.ctrlKey && !event.metaKey && !event.altKey && !event.shiftKey;
    if (plain && event.code === "KeyF" && !event.repeat && !isTyping(event.target) && !overlayOpen()) {
      event.preventDefault();
      search.scrollIntoView({ block: "nearest" });
      search.focus();
      search.select();
    }
  }

  function onInput(event) {
    if (event.target && event.target.id === SEARCH_ID) {
      filter(event.target.value);
    }
  }

  function onChange(event) {
    if (event.target && event.target.id === SELECT_ID) {
      markChosen();
    }
  }

  function onClick(event) {
    const button = event.target.closest && event.target.closest("[data-pick-reference]");
    if (button) {
      event.preventDefault();
      pick(button.dataset.pickReference);
    }
  }

  function onLoaded() {
    markChosen();
  }

  document.addEventListener("keydown", onKeyDown);
  document.addEventListener("input", onInput);
  document.addEventListener("change", onChange);
  document.addEventListener("click", onClick);
  document.addEventListener("htmx:load", onLoaded);
  onLoaded();
})();
