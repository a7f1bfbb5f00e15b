/* The review page: keyboard shortcuts and showing only the chosen decision method.
 * The page works without this file (every section shows, the radios choose); it adds speed.
 *
 * Controls with a shortcut carry data-key ("1", "Shift+P"), read from KeyboardEvent.code as
 * on the workbench, so they work on any keyboard layout. While the method is "edit", the
 * workflow form's own keys (inside #review-edit) come first; otherwise those are ignored, so
 * the digits pick annotations. The CSP allows no eval and no inline code.
 */
(function () {
  "use strict";

  const { keyName, isTyping, isOverlayKey, toggleOverlay } = window.QuireKeys;

  function reviewForm() {
    return document.getElementById("review-form");
  }

  function currentMethod() {
    const form = reviewForm();
    const checked = form && form.querySelector('input[name="gold_method"]:checked');
    return checked ? checked.value : "";
  }

  function setMethod(value) {
    const form = reviewForm();
    const radio = form && form.querySelector('input[name="gold_method"][value="' + CSS.escape(value) + '"]');
    if (radio && !radio.disabled && !radio.checked) {
      radio.checked = true;
    }
    showMethod();
  }

  // The form's class says which method's controls show (see review.css).
  function showMethod() {
    const form = reviewForm();
    if (!form) {
      return;
    }
    const method = currentMethod();
    ["pick", "merge", "edit"].forEach(function (name) {
      form.classList.toggle("review-form--" + name, method === name);
    });
    const edit = document.getElementById("review-edit");
    if (edit) {
      edit.hidden = method !== "edit";
    }
  }





  function pressDecide() {
    const button = document.querySelector('[data-shortcut="decide"]');
    if (!button || button.disabled) {
      return false;
    }
    button.click();
    return true;
  }

  function controlFor(name) {
    const form = reviewForm();
    if (!form) {
      return null;
    }
    const edit = document.getElementById("review-edit");
    const selector = '[data-key="' + CSS.escape(name) + '"]';
    const all = Array.from(form.querySelectorAll(selector)).filter(function (control) {
      return !control.disabled;
    });
    const inEdit = all.filter(function (control) {
      return edit && edit.contains(control);
    });
    const outside = all.filter(function (control) {
      return !(edit && edit.contains(control));
    });
    if (currentMethod() === "edit" && inEdit.length) {
      return inEdit[0];
    }
    return outside.length ? outside[0] : null;
  }

  function activate(control) {
    control.scrollIntoView({ block: "nearest" });
    if (control.type === "radio" || control.type === "checkbox") {
      control.click();
      return;
    }
    control.focus();
    if (control.tagName === "TEXTAREA") {
      const end = control.value.length;
      control.setSelectionRange(end, end);
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
      return;
    }
    const target = event.target;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      if (pressDecide()) {
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
      if (target.closest && target.closest("a, button, summary")) {
        return;
      }
      if (pressDecide()) {
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
    const control = controlFor(name);
    if (!control) {
      return;
    }
    event.preventDefault();
    activate(control);
  }

  // Choosing in a section chooses its method: a pick radio means "pick", and so on.
  function onChange(event) {
    const target = event.target;
    const form = reviewForm();
    if (!form || !form.contains(target)) {
      return;
    }
    if (target.name === "gold_pick") {
      setMethod("pick");
    } else if (target.name && target.name.indexOf("gold_merge-") === 0) {
      setMethod("merge");
    } else if (target.name === "gold_method") {
      showMethod();
    } else {
      const edit = document.getElementById("review-edit");
      if (edit && edit.contains(target)) {
        setMethod("edit");
      }
    }
  }

  function onClick(event) {
    const opener = event.target.closest && event.target.closest('[data-shortcut="overlay"]');
    if (opener) {
      event.preventDefault();
      toggleOverlay();
    }
  }

  document.addEventListener("keydown", onKeyDown);
  document.addEventListener("change", onChange);
  document.addEventListener("click", onClick);
  showMethod();
})();
