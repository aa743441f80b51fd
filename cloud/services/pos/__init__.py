"""The POS provider integration (docs/design.md section 9): configurations with sealed secrets, the
mirror reads, sync jobs and their worker, the verified webhook, and harvests pushed to the
shop's inventory."""

from cloud.services.pos.background import PosBackground, PosWorkPolicy
from cloud.services.pos.configs import PosConfigService
from cloud.services.pos.jobs import PosJobService
from cloud.services.pos.links import ProviderLinks
from cloud.services.pos.reads import PosReads
from cloud.services.pos.secrets import PosSecrets
from cloud.services.pos.webhook import PosWebhookReceiver

__all__ = [
    "PosBackground",
    "PosConfigService",
    "PosJobService",
    "PosReads",
    "PosSecrets",
    "PosWebhookReceiver",
    "PosWorkPolicy",
    "ProviderLinks",
]
