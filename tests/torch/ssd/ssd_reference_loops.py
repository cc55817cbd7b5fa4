"""Naive re-implementations of ssd.pytorch's loops, shared by the SSD tests (not a test file)."""
import torch


def reference_nms(boxes, scores, overlap=0.5, top_k=200, stable=True):
    """ssd.pytorch's while loop (re-implemented for the test, same tensor operations)."""
    keep = torch.zeros(scores.size(0), dtype=torch.long)
    x1, y1, x2, y2 = boxes.unbind(1)
    area = torch.mul(x2 - x1, y2 - y1)
    _, idx = scores.sort(stable=stable)
    idx = idx[-top_k:]
    count = 0
    while idx.numel() > 0:
        i = idx[-1]
        keep[count] = i
        count += 1
        if idx.size(0) == 1:
            break
        idx = idx[:-1]
        xx1 = torch.clamp(torch.index_select(x1, 0, idx), min=x1[i])
        yy1 = torch.clamp(torch.index_select(y1, 0, idx), min=y1[i])
        xx2 = torch.clamp(torch.index_select(x2, 0, idx), max=x2[i])
        yy2 = torch.clamp(torch.index_select(y2, 0, idx), max=y2[i])
        inter = torch.clamp(xx2 - xx1, min=0.0) * torch.clamp(yy2 - yy1, min=0.0)
        union = (torch.index_select(area, 0, idx) - inter) + area[i]
        idx = idx[(inter / union).le(overlap)]
    return keep, count
