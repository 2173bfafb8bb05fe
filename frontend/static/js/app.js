// Page behaviour the templates ask for with data attributes, so no page needs inline script or event
// handler attributes (the Content-Security-Policy runs scripts from our static files only). Listeners sit
// on the document, so content htmx swaps in later behaves the same.

// <select data-autosubmit>: choosing an option submits its form (team switcher, version pickers).
document.addEventListener("change", (event) => {
  const select = event.target.closest("select[data-autosubmit]");
  if (select) select.form.submit();
});

// <form data-confirm="Question?">: submitted only if the user confirms.
// <form data-diff-url=".../history/">: opens .../diff/<a>/<b>/ for the versions chosen in its a and b.
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) event.preventDefault();
  if (form.dataset.diffUrl) {
    event.preventDefault();
    window.location.href = form.dataset.diffUrl.replace("/history/", `/diff/${form.elements.a.value}/${form.elements.b.value}/`);
  }
});

// <button data-close-modal>: empties the #modal dialog htmx filled.
document.addEventListener("click", (event) => {
  if (event.target.closest("[data-close-modal]")) document.getElementById("modal").replaceChildren();
});
