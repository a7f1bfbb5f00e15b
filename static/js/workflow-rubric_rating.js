/* Rubric rating: number keys rate the highlighted criterion and move on, j / k move between
 * criteria, r reveals the next stage. The page works without this file: the options are plain
 * radio buttons and the reveal button a plain "save draft" after which the server shows the
 * item again with the next stage.
 *
 * The criteria are the form controls carrying data-rubric-criterion="<field name>"; each
 * option carries its number key in data-rubric-key. The key handler runs in the capture phase
 * and marks the keys it uses as handled, so the generic workbench keys never see them. Keys
 * are read from KeyboardEvent.code, as in workbench.js, so they work on any keyboard layout.
 */
(function () {
  "use strict";

  const { isTyping, keyName } = window.QuireKeys;
  let currentName = null;

  function workbenchForm() {
    return document.getElementById("workbench-form");
  }

  function criterionNames() {
    const form = workbenchForm();
    const names = [];
    if (form) {
      form.querySelectorAll("[data-rubric-criterion]").forEach(function (control) {
        const name = control.dataset.rubricCriterion;
        if (names.indexOf(name) === -1) {
          names.push(name);
        }
      });
    }
    return names;
  }

  function controlsOf(name) {
    const form = workbenchForm();
    if (!form || !name) {
      return [];
    }
    return Array.from(form.querySelectorAll('[data-rubric-criterion="' + CSS.escape(name) + '"]'));
  }

  function isChoice(controls) {
    return controls.length > 0 && controls[0].type === "radio";
  }

  function isAnswered(name) {
    const controls = controlsOf(name);
    if (isChoice(controls)) {
      return controls.some(function (control) {
        return control.checked;
      });
    }
    return controls.length > 0 && controls[0].value.trim() !== "";
  }

  function isRequired(name) {
    return controlsOf(name).some(function (control) {
      return control.required;
    });
  }

  function firstUnanswered(requiredOnly) {
    return criterionNames().find(function (name) {
      return !isAnswered(name) && (!requiredOnly || isRequired(name));
    });
  }

  function highlight(name) {
    document.querySelectorAll(".rubric-current").forEach(function (row) {
      row.classList.remove("rubric-current");
    });
    currentName = name || null;
    const row = name && document.getElementById("field-" + name);
    if (row) {
      row.classList.add("rubric-current");
      row.scrollIntoView({ block: "nearest" });
    }
  }

  // Reaching a text or number box puts the cursor in it, at the end of its text.
  function goTo(name) {
    highlight(name);
    const controls = controlsOf(name);
    if (controls.length && !isChoice(controls) && !controls[0].matches(":disabled")) {
      const box = controls[0];
      box.focus();
      try {
        box.setSelectionRange(box.value.length, box.value.length);
      } catch (error) {
        // Number boxes have no caret position to set; focus is enough there.
      }
    }
  }

  function move(step) {
    const names = criterionNames();
    if (!names.length) {
      return false;
    }
    let index = names.indexOf(currentName);
    if (index === -1) {
      index = step > 0 ? 0 : names.length - 1;
    } else {
      index = Math.min(names.length - 1, Math.max(0, index + step));
    }
    goTo(names[index]);
    return true;
  }

  function choose(key) {
    const names = criterionNames();
    if (!names.length) {
      return false;
    }
    if (names.indexOf(currentName) === -1) {
      highlight(firstUnanswered(false) || names[0]);
    }
    const option = controlsOf(currentName).find(function (control) {
      return control.dataset.rubricKey === key;
    });
    if (!option || option.matches(":disabled")) {
      return false;
    }
    option.click();
    const index = names.indexOf(currentName);
    if (index < names.length - 1) {
      goTo(names[index + 1]);
    }
    return true;
  }

  // Reveal: store the answers as a draft, then show the item again with the next stage.

  function revealButton() {
    return document.querySelector('[data-shortcut="rubric-reveal"]');
  }

  function setRevealStatus(text) {
    const status = document.getElementById("rubric-reveal-status");
    if (status) {
      status.textContent = text;
    }
  }

  function csrfToken() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (error) {
      return "";
    }
  }

  function reveal(button) {
    const form = workbenchForm();
    if (!form || button.disabled) {
      return;
    }
    const missing = firstUnanswered(true);
    if (missing) {
      goTo(missing);
      setRevealStatus("Answer every required question of this stage first.");
      return;
    }
    button.disabled = true;
    setRevealStatus("Saving your answers…");
    fetch(button.formAction, {
      method: "POST",
      body: new FormData(form),
      headers: { "HX-Request": "true", "X-CSRFToken": csrfToken() },
      credentials: "same-origin",
    })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("draft save answered " + response.status);
        }
        return window.htmx.ajax("GET", button.dataset.itemUrl, { target: "#workbench", swap: "outerHTML" });
      })
      .catch(function () {
        if (button.isConnected) {
          button.disabled = false;
          setRevealStatus("The next stage could not be shown; try again, or reload the page.");
        }
      });
  }

  // Wiring -------------------------------------------------------------------------------

  // The keys this script answers: digits pick a level, j / k move, r reveals.
  function keyOf(event) {
    const key = keyName(event);
    return /^[0-9jkr]$/.test(key) ? key : "";
  }

  function onKeyDown(event) {
    if (event.defaultPrevented || event.isComposing || event.repeat) {
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || event.shiftKey || isTyping(event.target)) {
      return;
    }
    const overlay = document.getElementById("shortcut-overlay");
    if ((overlay && overlay.open) || !workbenchForm() || !criterionNames().length) {
      return;
    }
    const key = keyOf(event);
    let handled = false;
    if (key === "j" || key === "k") {
      handled = move(key === "j" ? 1 : -1);
    } else if (key === "r") {
      const button = revealButton();
      if (button) {
        reveal(button);
        handled = true;
      }
    } else if (key) {
      handled = choose(key);
    }
    if (handled) {
      event.preventDefault();
    }
  }

  function onFocusIn(event) {
    const control = event.target.closest && event.target.closest("[data-rubric-criterion]");
    if (control && control.dataset.rubricCriterion !== currentName) {
      highlight(control.dataset.rubricCriterion);
    }
  }

  function onClick(event) {
    const button = event.target.closest && event.target.closest('[data-shortcut="rubric-reveal"]');
    if (button) {
      event.preventDefault();
      reveal(button);
    }
  }

  // A new item (or the next stage) swapped in: start on its first unanswered criterion.
  function start() {
    currentName = null;
    if (criterionNames().length) {
      highlight(firstUnanswered(false) || null);
    }
  }

  function onLoad(event) {
    const loaded = event.target;
    if (loaded && (loaded.id === "workbench" || (loaded.querySelector && loaded.querySelector("#workbench-form")))) {
      start();
    }
  }

  document.addEventListener("keydown", onKeyDown, true);
  document.addEventListener("focusin", onFocusIn);
  document.addEventListener("click", onClick);
  document.addEventListener("htmx:load", onLoad);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
