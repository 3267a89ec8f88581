"""Text processing: sentence split, sentence-window chunks, valid-token ids (section 3.2), title mentions."""
