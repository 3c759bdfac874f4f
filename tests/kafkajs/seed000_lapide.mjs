// Seed 000's tombstone code (a service deleting an entity with KafkaJS), as the
// seed writes it: test_kafkajs.sh runs emitirLapide on KafkaJS 2.2.4.

// Producao de lapide e verificacao de janela antes de confiar na exclusao.
// A lapide so cumpre o papel se todos os consumidores leem dentro da janela.

/**
 * Emite a lapide que instrui a compactacao a remover a chave por completo.
 * O valor precisa ser nulo de verdade, nao string vazia nem objeto vazio:
 * a comparacao feita pelo compactador e com ausencia de payload.
 */
async function emitirLapide(produtor, topico, chave) {
  await produtor.send({
    topic: topico,
    messages: [{ key: chave, value: null }],
  });
}

/**
 * Verifica se e seguro confiar na lapide, comparando o atraso de cada grupo
 * consumidor com a janela de retencao de lapides do topico.
 *
 * @param {Array<{grupo: string, atrasoMs: number}>} gruposConsumidores
 * @param {number} janelaLapideMs retencao configurada para lapides
 * @param {number} margem fracao da janela reservada como folga (0.5 = metade)
 */
function avaliarSegurancaDaExclusao(gruposConsumidores, janelaLapideMs, margem = 0.5) {
  const limiteSeguro = janelaLapideMs * margem;

  const emRisco = gruposConsumidores.filter((g) => g.atrasoMs > limiteSeguro);

  return {
    seguro: emRisco.length === 0,
    limiteSeguroMs: limiteSeguro,
    // Grupos que podem nunca ver a lapide: precisam de reconstrucao completa
    // a partir de um snapshot, e nao de leitura incremental.
    gruposQuePrecisamReconstruir: emRisco.map((g) => g.grupo),
  };
}

// Uso tipico dentro do fluxo de exclusao de dados pessoais.
async function excluirEntidade({ produtor, topico, chave, gruposConsumidores, janelaLapideMs }) {
  const avaliacao = avaliarSegurancaDaExclusao(gruposConsumidores, janelaLapideMs);

  await emitirLapide(produtor, topico, chave);

  if (!avaliacao.seguro) {
    // A exclusao foi registrada, mas nao esta comprovada ponta a ponta.
    // O registro abaixo e o que transforma um risco invisivel em tarefa.
    return {
      lapideEmitida: true,
      exclusaoComprovada: false,
      acaoNecessaria: 'reconstruir estado dos grupos atrasados a partir de snapshot',
      grupos: avaliacao.gruposQuePrecisamReconstruir,
    };
  }

  return { lapideEmitida: true, exclusaoComprovada: true };
}

export { emitirLapide, avaliarSegurancaDaExclusao, excluirEntidade };
