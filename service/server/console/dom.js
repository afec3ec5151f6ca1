// Small helpers for building the page.

/** An element with text (never HTML: names and event ids are user data). */
export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

/** `fn`, run at most once per animation frame however often the result is called:
 * a burst of scrolls, samples or matches costs one redraw. */
export function perFrame(fn) {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      fn();
    });
  };
}
