"""Articles from sources: what an article may say is what its recorded sources say.

The product's first principle applied to the content. Four rooms, data flowing one way:

``gather``     a topic's sources (the backlog's notes files and links, a feed item's page), fetched with bounds,
               their main text extracted, each stored once in the ledger (``sources``, ``topic_sources``)
``research``   the facts taken from them, each a statement with the span of the source it came from
               (``source_facts``); the outline and every part are written from these and nothing else
``specifics``  what in a sentence can be checked against a source: numbers with their units, names, commands,
               identifiers, links, quotations; normalised ("41 min" = "41 minutes", 四十一 = 41)
``grounding``  the check: every specific of the article is in its sources, or the sentence is unsupported;
               no long run copied from a web page unquoted; first person only from the operator's own notes
``cite``       inline markers and the Sources list every publisher shows
"""
