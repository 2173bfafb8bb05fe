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

// <button data-copy="#id">: copies that field's text, and says so on the button for a moment.
// <button data-download="#id" data-filename="run.yaml">: saves that field's text as a file.
document.addEventListener("click", async (event) => {
  const copy = event.target.closest("[data-copy]");
  if (copy) {
    await copyText(document.querySelector(copy.dataset.copy));
    flash(copy, "Copied");
  }
  const download = event.target.closest("[data-download]");
  if (download) {
    const text = document.querySelector(download.dataset.download).value;
    const link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([text], { type: "text/yaml" }));
    link.download = download.dataset.filename;
    link.click();
    URL.revokeObjectURL(link.href);
  }
});

// The Clipboard API needs a secure context (https or localhost); elsewhere the selection is copied.
async function copyText(field) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(field.value);
  } else {
    field.select();
    document.execCommand("copy");
  }
}

function flash(button, text) {
  const label = button.textContent;
  button.textContent = text;
  setTimeout(() => { button.textContent = label; }, 1500);
}
