"""Drop-in replacements for other libraries' ranking metrics, over jaxrank's core.

One module per peer, with the peer's names, signatures, defaults, errors and conventions;
each function is a few lines over jaxrank's metrics and returns what the peer returns (JAX
arrays in place of torch tensors; Python floats and NumPy float64 arrays for scikit-learn):

* :mod:`jaxrank.compat.torchmetrics`: ``retrieval_*`` functions and ``Retrieval*`` classes.
* :mod:`jaxrank.compat.torcheval`: ``retrieval_recall``, ``retrieval_precision``,
  ``hit_rate``, ``reciprocal_rank``.
* :mod:`jaxrank.compat.autointent`: ``retrieval_{map,hit_rate,precision,ndcg,mrr}``
  (plain, ``_intersecting``, ``_macro``) over label lists.
* :mod:`jaxrank.compat.sklearn`: ``roc_auc_score``, ``average_precision_score``,
  ``ndcg_score``, ``dcg_score``.
* :mod:`jaxrank.compat.clu`: jaxrank's accumulator as a ``clu.metrics.Metric``.
* :mod:`jaxrank.compat.rax`: rax 0.4's losses, lambdaweights, rank helpers and
  ``gumbel_t12n`` / ``segment_t12n``, over :mod:`jaxrank.losses`.

Import the module you need (``from jaxrank.compat import torchmetrics as tm``); none of
them imports the peer's own package, so torch and friends are never needed at run time.
"""
