"""The box head in Scene-Graph-Benchmark's relation mode (SGB's ``ROIBoxHead.forward`` with
``MODEL.RELATION_ON``): PredCls / SGCls / SGDet from ``USE_GT_BOX`` / ``USE_GT_OBJECT_LABEL``.
"""
from ...twostage.box_head import ROIBoxHead, add_predict_logits

__all__ = ['RelationBoxHead']


class RelationBoxHead(ROIBoxHead):
    """:class:`~gluontrain.torch.twostage.box_head.ROIBoxHead` (same parts and names) whose
    ``forward`` is the relation mode's: with ``use_gt_box`` the ground-truth boxes
    (``labels``, ``attributes``) are the proposals, SGCls adds the (frozen) predictor's
    ``predict_logits``; SGDet labels the proposals with the matched ground truth (training,
    or evaluation without ``custum_eval``), adds ``predict_logits`` and runs the
    post-processor in relation mode.

    Parameters
    ----------
    feature_extractor, predictor, post_processor, sampler, cls_agnostic
        As :class:`~gluontrain.torch.twostage.box_head.ROIBoxHead`.
    use_gt_box, use_gt_object_label : bool
        ``MODEL.ROI_RELATION_HEAD.USE_GT_BOX`` / ``USE_GT_OBJECT_LABEL``.
    custum_eval : bool
        ``TEST.CUSTUM_EVAL`` (images without annotations).
    """

    def __init__(self, feature_extractor, predictor, post_processor, sampler,
                 cls_agnostic=False, use_gt_box=False, use_gt_object_label=False,
                 custum_eval=False):
        super().__init__(feature_extractor, predictor, post_processor, sampler, cls_agnostic)
        self.use_gt_box, self.use_gt_object_label = use_gt_box, use_gt_object_label
        self.custum_eval = custum_eval

    def forward(self, features, proposals=None, targets=None):
        """-> ``(x, proposals_or_detections, {})`` as SGB's ``ROIBoxHead.forward`` in
        relation mode."""
        if self.use_gt_box:
            if targets is None:
                raise ValueError('USE_GT_BOX (PredCls/SGCls) needs the targets in evaluation '
                                 'too: pass the ground-truth BoxList of each image')
            proposals = [t.copy_with_fields(['labels', 'attributes'], skip_missing=True)
                         for t in targets]
            x = self.feature_extractor(features, proposals)
            if self.use_gt_object_label:
                return x, proposals, {}
            class_logits, _ = self.predictor(x)
            return x, add_predict_logits(proposals, class_logits), {}
        if self.training or not self.custum_eval:
            if targets is None:
                raise ValueError('SGDet labels the detections with the matched ground truth '
                                 '(SGB): pass the targets, or set TEST.CUSTUM_EVAL True for '
                                 'images without annotations')
            proposals = self.samp_processor.assign_label_to_proposals(proposals, targets)
        x = self.feature_extractor(features, proposals)
        class_logits, box_regression = self.predictor(x)
        proposals = add_predict_logits(proposals, class_logits)
        x, result = self.post_processor((x, class_logits, box_regression), proposals,
                                        relation_mode=True)
        return x, result, {}
