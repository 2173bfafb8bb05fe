// The new-run form's "current config" preview (<form data-preview-url>): after a change, or half a second
// after typing stops, the form's fields less the pasted YAML are posted and the preview takes the answer.
// A newer edit cancels the request before it; so does submitting the form, which leaves the page: a
// cancelled preview is nothing to report (htmx would log each one as an error).
const PREVIEW_DELAY_MS = 500;
const form = document.querySelector("form[data-preview-url]");

if (form) {
  let inFlight = null;
  let timer = null;

  const refresh = async () => {
    inFlight?.abort();
    inFlight = new AbortController();
    const body = new FormData(form);
    body.delete("config_yaml");
    try {
      const response = await fetch(form.dataset.previewUrl, { method: "POST", body, signal: inFlight.signal });
      if (!response.ok) return;
      const html = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = html.getElementById("config-yaml-out");
      if (fresh) document.getElementById("config-yaml-out").value = fresh.value;
    } catch (error) {
      if (error.name !== "AbortError") throw error;
    }
  };

  const later = () => {
    clearTimeout(timer);
    timer = setTimeout(refresh, PREVIEW_DELAY_MS);
  };

  form.addEventListener("change", (event) => event.target.name !== "config_yaml" && refresh());
  form.addEventListener("input", (event) => event.target.name !== "config_yaml" && later());
  form.addEventListener("submit", () => {
    clearTimeout(timer);
    inFlight?.abort();
  });
}
