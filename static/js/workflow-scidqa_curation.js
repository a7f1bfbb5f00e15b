/* SciDQA curation: the references editor, a live placeholder check and the fields that
 * only count for relevant pairs. Loaded on every workbench page; it does nothing unless
 * the form has a references box (textarea[data-references]).
 *
 * The references textarea (one "r1: description" a line) is what the form posts and what
 * works without JavaScript. This script hides it behind a list of rows, one a reference,
 * and writes the rows back into it on every change, firing "input" so the workbench
 * autosaves. Keys inside a row: Enter adds a row below, Backspace in an empty description
 * removes the row, ArrowUp / ArrowDown move between rows, Esc leaves (workbench.js).
 * Outside text boxes: r goes to the references (adding the first), Shift+R adds one.
 *
 * CSP: no inline code or styles; rows are built with createElement and textContent only.
 */
(function () {
  "use strict";

  const LINE = /^\[?([rR]\d+)(?!\w)\]?\s*(?:[:=\u2013\u2014-]\s*)?(.*)$/;
  const PLACEHOLDER_IN_TEXT = /(?<!\w)r([1-9]\d*)(?!\w)/g;
  const TEXT_NAMES = ["rewritten_question", "rewritten_answer"];
  const { isTyping } = window.QuireKeys;

  function referencesBox() {
    return document.querySelector("#workbench-form textarea[data-references]");
  }

  function editorOf(textarea) {
    return textarea ? document.getElementById(textarea.id + "-editor") : null;
  }

  // Rows <-> text ------------------------------------------------------------------------

  function parseLines(text) {
    return text
      .split(/\r?\n/)
      .map(function (line) {
        return line.trim();
      })
      .filter(Boolean)
      .map(function (line) {
        const match = LINE.exec(line);
        return match ? { placeholder: match[1].toLowerCase(), description: match[2] } : { placeholder: "", description: line };
      });
  }

  function rowsOf(editor) {
    return Array.from(editor.querySelectorAll(".reference-row"));
  }

  function rowText(row) {
    const placeholder = row.querySelector(".reference-placeholder").value.trim();
    const description = row.querySelector(".reference-description").value.trim();
    if (!description) {
      return ""; // a row not filled in yet is not a reference
    }
    return placeholder ? placeholder + ": " + description : description;
  }

  function writeBack(textarea, editor) {
    const text = rowsOf(editor).map(rowText).filter(Boolean).join("\n");
    if (textarea.value !== text) {
      textarea.value = text;
      textarea.dispatchEvent(new Event("input", { bubbles: true }));
    }
    updateCheck(editor);
  }

  function nextPlaceholder(editor) {
    let highest = 0;
    rowsOf(editor).forEach(function (row) {
      const match = /^r(\d+)$/.exec(row.querySelector(".reference-placeholder").value.trim());
      if (match) {
        highest = Math.max(highest, parseInt(match[1], 10));
      }
    });
    return "r" + (highest + 1);
  }

  // Building the editor ------------------------------------------------------------------

  function makeInput(className, value, label) {
    const input = document.createElement("input");
    input.type = "text";
    input.className = className;
    input.value = value;
    input.setAttribute("aria-label", label);
    input.autocomplete = "off";
    return input;
  }

  function makeRow(placeholder, description) {
    const row = document.createElement("li");
    row.className = "reference-row";
    const placeholderInput = makeInput("reference-placeholder", placeholder, "Placeholder");
    placeholderInput.size = 4;
    const descriptionInput = makeInput("reference-description", description, "Short description of " + (placeholder || "the reference"));
    descriptionInput.placeholder = "Authors, year, title";
    descriptionInput.maxLength = 500;
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "button reference-remove";
    remove.textContent = "Remove";
    remove.setAttribute("aria-label", "Remove " + (placeholder || "this reference"));
    row.append(placeholderInput, descriptionInput, remove);
    return row;
  }

  function build(textarea) {
    textarea.dataset.enhanced = "on";
    textarea.hidden = true;
    const editor = document.createElement("div");
    editor.className = "reference-editor";
    editor.id = textarea.id + "-editor";
    const list = document.createElement("ol");
    list.className = "reference-rows";
    parseLines(textarea.value).forEach(function (row) {
      list.appendChild(makeRow(row.placeholder, row.description));
    });
    const add = document.createElement("button");
    add.type = "button";
    add.className = "button reference-add";
    add.append("Add a reference ");
    const key = document.createElement("kbd");
    key.textContent = "Shift+R";
    add.appendChild(key);
    const check = document.createElement("p");
    check.className = "reference-check";
    check.setAttribute("role", "status");
    editor.append(list, add, check);
    textarea.after(editor);

    list.addEventListener("input", function () {
      writeBack(textarea, editor);
    });
    list.addEventListener("keydown", function (event) {
      onRowKey(event, textarea, editor);
    });
    list.addEventListener("click", function (event) {
      const remove = event.target.closest(".reference-remove");
      if (remove) {
        removeRow(remove.closest(".reference-row"), textarea, editor);
      }
    });
    add.addEventListener("click", function () {
      addRow(textarea, editor, null);
    });
    updateCheck(editor);
  }

  // Editing ------------------------------------------------------------------------------

  function addRow(textarea, editor, after) {
    const row = makeRow(nextPlaceholder(editor), "");
    const list = editor.querySelector(".reference-rows");
    if (after) {
      after.after(row);
    } else {
      list.appendChild(row);
    }
    const description = row.querySelector(".reference-description");
    description.focus();
    writeBack(textarea, editor);
    return row;
  }

  function removeRow(row, textarea, editor) {
    const rows = rowsOf(editor);
    const index = rows.indexOf(row);
    const neighbour = rows[index - 1] || rows[index + 1];
    row.remove();
    if (neighbour) {
      neighbour.querySelector(".reference-description").focus();
    } else {
      editor.querySelector(".reference-add").focus();
    }
    writeBack(textarea, editor);
  }

  function moveFocus(row, offset, input) {
    const rows = Array.from(row.parentElement.children);
    const target = rows[rows.indexOf(row) + offset];
    if (!target) {
      return false;
    }
    const column = input.classList.contains("reference-placeholder") ? ".reference-placeholder" : ".reference-description";
    target.querySelector(column).focus();
    return true;
  }

  function onRowKey(event, textarea, editor) {
    const input = event.target;
    const row = input.closest && input.closest(".reference-row");
    if (!row || input.tagName !== "INPUT" || event.isComposing || event.altKey || event.metaKey || event.ctrlKey) {
      return;
    }
    if (event.key === "Enter" && !event.shiftKey) {
      // Enter in a text box would submit the form; here it starts the next reference.
      event.preventDefault();
      addRow(textarea, editor, row);
    } else if (event.key === "Backspace" && input.classList.contains("reference-description") && input.value === "") {
      event.preventDefault();
      removeRow(row, textarea, editor);
    } else if (event.key === "ArrowUp" || event.key === "ArrowDown") {
      if (moveFocus(row, event.key === "ArrowUp" ? -1 : 1, input)) {
        event.preventDefault();
      }
    }
  }

  // Which placeholders the texts use against those described ---------------------------

  function usedPlaceholders() {
    const used = new Set();
    TEXT_NAMES.forEach(function (name) {
      const box = document.querySelector('#workbench-form [name="' + name + '"]');
      if (box) {
        Array.from(box.value.matchAll(PLACEHOLDER_IN_TEXT)).forEach(function (match) {
          used.add("r" + match[1]);
        });
      }
    });
    return used;
  }

  function byNumber(left, right) {
    return parseInt(left.slice(1), 10) - parseInt(right.slice(1), 10);
  }

  function updateCheck(editor) {
    const check = editor.querySelector(".reference-check");
    const used = usedPlaceholders();
    const described = new Set(
      rowsOf(editor)
        .map(function (row) {
          return row.querySelector(".reference-placeholder").value.trim().toLowerCase();
        })
        .filter(Boolean),
    );
    const undescribed = Array.from(used).filter(function (name) {
      return !described.has(name);
    });
    const unused = Array.from(described).filter(function (name) {
      return !used.has(name);
    });
    const parts = [];
    if (undescribed.length) {
      parts.push("Used in the texts, not described: " + undescribed.sort(byNumber).join(", ") + ".");
    }
    if (unused.length) {
      parts.push("Described, not used in the texts: " + unused.sort(byNumber).join(", ") + ".");
    }
    check.classList.toggle("reference-check--problem", parts.length > 0);
    check.textContent = parts.length ? parts.join(" ") : used.size ? "Every placeholder in the texts is described." : "";
  }

  // Fields for relevant pairs only --------------------------------------------------------

  function markRelevance(form) {
    const chosen = form.querySelector('input[name="relevance"]:checked');
    form.dataset.scidqaRelevance = chosen ? chosen.value : "";
  }

  // Keys ----------------------------------------------------------------------------------


  // Runs before workbench.js (capture), which would otherwise focus the hidden textarea.
  function onKeyDown(event) {
    if (event.defaultPrevented || event.isComposing || event.repeat || event.code !== "KeyR") {
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || isTyping(event.target)) {
      return;
    }
    const overlay = document.getElementById("shortcut-overlay");
    const textarea = referencesBox();
    const editor = editorOf(textarea);
    if ((overlay && overlay.open) || !editor || textarea.matches(":disabled")) {
      return;
    }
    event.preventDefault();
    const first = editor.querySelector(".reference-description");
    if (event.shiftKey || !first) {
      addRow(textarea, editor, null);
    } else {
      first.scrollIntoView({ block: "nearest" });
      first.focus();
    }
  }

  function onInput(event) {
    const target = event.target;
    if (target && TEXT_NAMES.indexOf(target.name) !== -1) {
      const editor = editorOf(referencesBox());
      if (editor) {
        updateCheck(editor);
      }
    }
  }

  function onChange(event) {
    const target = event.target;
    if (target && target.name === "relevance" && target.form) {
      markRelevance(target.form);
    }
  }

  function enhance(root) {
    const scope = root && root.querySelectorAll ? root : document;
    scope.querySelectorAll("textarea[data-references]:not([data-enhanced])").forEach(function (textarea) {
      build(textarea);
      if (textarea.form) {
        markRelevance(textarea.form);
      }
    });
  }

  document.addEventListener("keydown", onKeyDown, true);
  document.addEventListener("input", onInput);
  document.addEventListener("change", onChange);
  document.addEventListener("htmx:load", function (event) {
    enhance(event.target);
  });
  enhance(document);
})();
