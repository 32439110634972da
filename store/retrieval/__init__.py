"""The last mile of retrieval-augmented generation: rerank, then answer from numbered passages, citations checked.

``service.Retrieval`` ties it together; ``grounding`` holds the prompt and the
citation check; ``providers`` the rerank and chat models behind the seams in
``base`` (``fake`` is the reference and the test double).
"""

from store.retrieval.grounding import Citation, GroundedAnswer
from store.retrieval.options import Allow
from store.retrieval.service import Retrieval

__all__ = ["Allow", "Citation", "GroundedAnswer", "Retrieval"]
