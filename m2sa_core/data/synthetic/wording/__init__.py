# Copyright 2026 m2sa_ros maintainers
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""
Training requests worded afresh, kept clear of the held-out phrasings.

The fixed phrasings of a question family let a small model learn which sentence means
which answer instead of which words do. These modules say what a family asks in many
other ways, for training only: ``view`` (visible/complete requests from the view
lexicon), ``view_twins`` (each fixed view request again as the other kind), ``mixed``
(object-and-part requests without the word "part") and ``level`` (one use asked for the
object and for its part), all composed through ``lexicon``, which refuses any sentence
that carries a clause of a held-out phrasing.
"""
