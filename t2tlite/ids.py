"""The ids every vocabulary reserves (no BOS): 0 = PAD, 1 = EOS, 2 = UNK.

Kept apart from `t2tlite.data.vocab` so that layers and the search can use
them without importing sentencepiece and tensorflow-text.
"""
PAD_ID = 0
EOS_ID = 1
UNK_ID = 2
