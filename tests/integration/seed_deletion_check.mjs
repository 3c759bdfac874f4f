// seed_deletion_check.mjs - the deletion-safety check of the text the design started from
// (its avaliarSegurancaDaExclusao, kept as that text writes it) run on the lags that
// `topicctl erase --json` measured, so that test_groups_fs.sh can judge erase's
// verdict against it. Reads {"groups": {NAME: LAG_MS}, "window_ms": N, "margin": F}
// on stdin; prints {"seguro", "limiteSeguroMs", "gruposQuePrecisamReconstruir"}.

function avaliarSegurancaDaExclusao(gruposConsumidores, janelaLapideMs, margem = 0.5) {
  const limiteSeguro = janelaLapideMs * margem;

  const emRisco = gruposConsumidores.filter((g) => g.atrasoMs > limiteSeguro);

  return {
    seguro: emRisco.length === 0,
    limiteSeguroMs: limiteSeguro,
    gruposQuePrecisamReconstruir: emRisco.map((g) => g.grupo),
  };
}

let input = '';
process.stdin.on('data', (d) => { input += d; });
process.stdin.on('end', () => {
  const q = JSON.parse(input);
  const grupos = Object.entries(q.groups).map(([grupo, atrasoMs]) => ({ grupo, atrasoMs }));
  console.log(JSON.stringify(avaliarSegurancaDaExclusao(grupos, q.window_ms, q.margin)));
});
