"""Full-text search of conversations: `index` keeps the FTS index of message text and titles,
`matching` asks it (the selectors' `conversation_search` answers the pages)."""
