"""Framework adapters over the store: LangChain (``langchain.py``) and LlamaIndex (``llamaindex.py``).

Each module imports its framework and needs its extra (``vectorsync[langchain]``,
``vectorsync[llamaindex]``); nothing else of ours imports them, so ``import store`` and a worker's start load
no framework (``tests/unit/test_layout.py`` checks it). ``base.py`` holds what they share: a search of a
collection under a fixed filter. Django is a producer adapter: ``producer/django/``.
"""

__all__: list[str] = []
