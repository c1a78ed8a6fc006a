/* Included only in the live card: Metaflow's viewers call this with each refresh payload. */
window.metaflow_card_update = function (payload) {
  if (payload && window.TC) window.TC.update(payload);
  return true;
};
