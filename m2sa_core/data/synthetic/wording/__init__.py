"""Training requests worded afresh, kept clear of the held-out phrasings.

The fixed phrasings of a question family let a small model learn which sentence means
which answer instead of which words do. These modules say what a family asks in many
other ways, for training only: ``view`` (visible/complete requests from the view
lexicon), ``view_twins`` (each fixed view request again as the other kind), ``mixed``
(object-and-part requests without the word "part") and ``level`` (one use asked for the
object and for its part), all composed through ``lexicon``, which refuses any sentence
that carries a clause of a held-out phrasing.
"""
