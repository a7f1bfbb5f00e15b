/* Keyboard helpers shared by the workbench, its workflow scripts and the review page.
 *
 * Keys are named from KeyboardEvent.code ("k", "Shift+M", "3"), so shortcuts work on any
 * keyboard layout. Loaded (deferred) before the scripts that use window.QuireKeys.
 */
(function () {
  "use strict";

  const NOT_TYPING_INPUTS = ["checkbox", "radio", "button", "submit", "reset", "hidden", "range", "color", "file", "image"];

  function keyName(event) {
    const code = event.code || "";
    let base = "";
    if (/^Key[A-Z]$/.test(code)) {
      base = code.slice(3);
    } else if (/^Digit\d$/.test(code)) {
      base = code.slice(5);
    } else if (/^Numpad\d$/.test(code)) {
      base = code.slice(6);
    } else {
      return "";
    }
    return event.shiftKey ? "Shift+" + base.toUpperCase() : base.toLowerCase();
  }

  // True when keys typed into the element are text, so shortcuts must leave them alone.
  function isTyping(element) {
    if (!element || !element.tagName) {
      return false;
    }
    if (element.isContentEditable || element.tagName === "TEXTAREA" || element.tagName === "SELECT") {
      return true;
    }
    return element.tagName === "INPUT" && NOT_TYPING_INPUTS.indexOf(element.type) === -1;
  }

  function isOverlayKey(event) {
    return event.key === "?" || (event.shiftKey && event.code === "Slash");
  }

  function toggleOverlay() {
    const overlay = document.getElementById("shortcut-overlay");
    if (!overlay) {
      return;
    }
    if (overlay.open) {
      overlay.close();
    } else {
      overlay.showModal();
    }
  }

  window.QuireKeys = Object.freeze({
    keyName: keyName,
    isTyping: isTyping,
    isOverlayKey: isOverlayKey,
    toggleOverlay: toggleOverlay,
  });
})();
