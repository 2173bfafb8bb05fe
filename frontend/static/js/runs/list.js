// Compare: gather the ticked runs into one shareable ?runs=1,2,3 parameter.
document.getElementById("compare-form")?.addEventListener("submit", (event) => {
  const form = event.currentTarget;
  const ids = [...form.querySelectorAll("input[name=run]:checked")].map((box) => box.value);
  form.querySelector("#compare-runs").value = ids.join(",");
  form.querySelectorAll("input[name=run]").forEach((box) => { box.disabled = true; });
});
