// Compare: gather the ticked runs into one shareable ?runs=1,2,3 parameter (without scripts the form
// submits ?runs=1&runs=2&runs=3, which the compare page reads too).
document.getElementById("compare-form")?.addEventListener("submit", (event) => {
  const form = event.currentTarget;
  const boxes = form.querySelectorAll("input[type=checkbox][name=runs]");
  const ids = [...boxes].filter((box) => box.checked).map((box) => box.value);
  form.querySelector("#compare-runs").value = ids.join(",");
  boxes.forEach((box) => { box.disabled = true; });
});
