"""The app whose models are indexed: Note through VECTORSYNC["MODELS"], Ticket through @indexed."""
